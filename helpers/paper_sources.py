"""The paper profile's models and data, read from local files in their published formats.

Nothing in this module touches the network while the book runs. On a machine with internet,

    python -m helpers.paper_sources --profile paper download   # (make data PROFILE=paper)

fetches what the profile names into the data folder (``$SIXTEEN_HEADS_DATA``, default
``<repo>/data``); the GPU machine then needs only that folder. Every path in a profile's
``models`` section is a *path parameter*: absolute, or relative to the data folder, so
pointing one at your own copy is a one-line change (or a copied profile). When something is
missing, ``check_local`` (which ``make models`` and the runner call first) stops with one
message that lists each missing item, what it is, where it is expected and how to get it.

Formats, one reader each:

* GLUE task folders as GLUE distributes them (tab-separated, read by column name): ``MNLI``
  (``train.tsv``, ``dev_matched.tsv``, ``dev_mismatched.tsv``; ``sentence1``, ``sentence2``,
  ``gold_label``), ``SST-2`` and ``MRPC`` (``train.tsv``, ``dev.tsv``), ``CoLA`` (no header:
  source, label, original label, sentence). ``download`` writes them from ``datasets``.
* Test sets as sacrebleu ships them: one sentence per line, source and reference in two files
  ``<folder>/<set>.<src>-<tgt>.<src|tgt>`` (``/`` in a set's name becomes ``_``), e.g.
  ``sacrebleu/wmt13.en-fr.en``; ``download`` writes them with sacrebleu's own downloader.
  They are Moses-tokenised and BPE-encoded with the model's codes (fairseq's ``moses`` and
  ``subword_nmt`` encoders, as fairseq's hub interface does for this model).
* A fairseq model archive as published (``model.pt`` with its ``args``, ``dict.<lang>.txt``,
  ``bpecodes``), e.g. ``wmt14.en-fr.joined-dict.transformer``.
* A corpus prepared by fairseq's ``examples/translation/prepare-iwslt14.sh`` (tokenised,
  lower-cased, BPE-encoded ``{train,valid,test}.{de,en}``), used as it is.
* Hugging Face models: a hub name, or a folder in the hub layout (``config.json``, weights,
  tokenizer files).

Every sentence stays in the subword units the model reads; BLEU merges BPE before scoring
(``metrics.merge_bpe``), so it is tokenised BLEU on Moses tokens, as the paper says
(REFERENCE.md §1.1 and §12.3: the authors' ablation script scored detokenised text instead).
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tarfile
import types
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import appendix_tasks, nli_task, translation_task
from .atomic import atomic_path
from .models import MissingDownloadError
from .results import ROOT

DATA_ENV = "SIXTEEN_HEADS_DATA"
ARCHIVE_URLS = {  # REFERENCE.md §1.1 (the fairseq README link, now on dl.fbaipublicfiles.com)
    "wmt14.en-fr.joined-dict.transformer":
        "https://dl.fbaipublicfiles.com/fairseq/models/wmt14.en-fr.joined-dict.transformer.tar.bz2",
}
DOWNLOAD = "python -m helpers.paper_sources --profile {profile} download"


def data_root() -> Path:
    """``$SIXTEEN_HEADS_DATA`` or ``<repo>/data``."""
    return Path(os.environ.get(DATA_ENV, ROOT / "data"))


def local_path(path: str | os.PathLike) -> Path:
    """``path`` as given when absolute, else under ``data_root()``."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else data_root() / path


# ---- GLUE ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GlueTask:
    folder: str                 # GLUE's folder name
    files: dict[str, str]       # our split name -> GLUE file
    hub_splits: dict[str, str]  # our split name -> split of nyu-mll/glue in `datasets`
    hub_config: str


GLUE = {
    "nli": GlueTask("MNLI", {"train": "train.tsv", "matched": "dev_matched.tsv", "mismatched": "dev_mismatched.tsv"},
                    {"train": "train", "matched": "validation_matched", "mismatched": "validation_mismatched"}, "mnli"),
    "sentiment": GlueTask("SST-2", {"train": "train.tsv", "valid": "dev.tsv"},
                          {"train": "train", "valid": "validation"}, "sst2"),
    "acceptability": GlueTask("CoLA", {"train": "train.tsv", "valid": "dev.tsv"},
                              {"train": "train", "valid": "validation"}, "cola"),
    "paraphrase": GlueTask("MRPC", {"train": "train.tsv", "valid": "dev.tsv"},
                           {"train": "train", "valid": "validation"}, "mrpc"),
}


def _rows(path: Path, header: bool) -> tuple[list[str], list[list[str]]]:
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return (rows[0], rows[1:]) if header else ([], rows)


def _column(names: list[str], name: str, path: Path) -> int:
    if name not in names:
        raise ValueError(f"{path} has no column {name!r} (its header is {names}); is it a GLUE-format file?")
    return names.index(name)


def read_glue_file(task: str, path: Path) -> list:
    """Examples of one GLUE file: ``nli_task.Example`` for MNLI (labels in ``nli_task.LABELS``
    order; unlabelled ``-`` rows dropped), ``appendix_tasks.Example`` for the others."""
    if task == "nli":
        names, rows = _rows(path, header=True)
        a, b, y = (_column(names, c, path) for c in ("sentence1", "sentence2", "gold_label"))
        return [nli_task.Example(r[a], r[b], nli_task.LABELS.index(r[y]), edit="")
                for r in rows if r[y] in nli_task.LABELS]
    if task == "acceptability":
        _, rows = _rows(path, header=False)
        return [appendix_tasks.Example(text=r[3], label=int(r[1])) for r in rows if len(r) >= 4]
    names, rows = _rows(path, header=True)
    if task == "sentiment":
        text, y = _column(names, "sentence", path), _column(names, "label", path)
        return [appendix_tasks.Example(text=r[text], label=int(r[y])) for r in rows]
    a, b, y = (_column(names, c, path) for c in ("#1 String", "#2 String", "Quality"))
    return [appendix_tasks.Example(text=r[a], text_pair=r[b], label=int(r[y])) for r in rows]


def read_glue(task: str, folder: str | os.PathLike) -> dict[str, list]:
    """``{split: examples}`` of a GLUE task folder (see ``GLUE`` for the files)."""
    spec, folder = GLUE[task], local_path(folder)
    return {split: read_glue_file(task, folder / name) for split, name in spec.files.items()}


def write_glue(task: str, splits: dict[str, list[dict]], folder: Path) -> None:
    """Write ``datasets`` rows (``{split: [row]}``, nyu-mll/glue fields) as GLUE-format files."""
    spec = GLUE[task]
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        lines = []
        if task == "nli":
            lines.append("index\tsentence1\tsentence2\tgold_label")
            lines += [f"{i}\t{r['premise']}\t{r['hypothesis']}\t{nli_task.LABELS[r['label']]}"
                      for i, r in enumerate(rows) if r["label"] >= 0]
        elif task == "acceptability":
            lines += [f"glue\t{r['label']}\t\t{r['sentence']}" for r in rows]
        elif task == "sentiment":
            lines.append("sentence\tlabel")
            lines += [f"{r['sentence']}\t{r['label']}" for r in rows]
        else:
            lines.append("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String")
            lines += [f"{r['label']}\t{2 * i}\t{2 * i + 1}\t{r['sentence1']}\t{r['sentence2']}" for i, r in enumerate(rows)]
        with atomic_path(folder / spec.files[split]) as tmp:
            tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ---- translation data ----------------------------------------------------------------------
def test_set_files(folder: str | os.PathLike, test_set: str, langpair: str) -> tuple[Path, Path]:
    """(source, reference) files of a sacrebleu test set under ``folder``."""
    src, tgt = langpair.split("-")
    stem = f"{test_set.replace('/', '_')}.{langpair}"
    folder = local_path(folder)
    return folder / f"{stem}.{src}", folder / f"{stem}.{tgt}"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def read_test_sets(folder: str | os.PathLike, sets: list[str], langpair: str) -> list[tuple[str, str]]:
    """Raw (source, reference) sentence pairs of ``sets`` in order, concatenated."""
    pairs = []
    for test_set in sets:
        src, ref = test_set_files(folder, test_set, langpair)
        sources, refs = _lines(src), _lines(ref)
        if len(sources) != len(refs):
            raise ValueError(f"{src} has {len(sources)} lines but {ref} has {len(refs)}")
        pairs += zip(sources, refs)
    return pairs


class Preprocessor:
    """Moses tokenisation and subword-nmt BPE with a model's codes (fairseq's own encoders, as
    its hub interface applies them): ``source(text)`` and ``target(text)`` return the
    space-separated subword tokens the model reads and writes."""

    def __init__(self, langpair: str, bpe_codes: Path):
        from .fairseq_compat import import_fairseq

        import_fairseq()
        from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig
        from fairseq.data.encoders.subword_nmt_bpe import SubwordNMTBPE, SubwordNMTBPEConfig

        src, tgt = langpair.split("-")
        self._tok = {lang: MosesTokenizer(MosesTokenizerConfig(source_lang=lang, target_lang=lang)) for lang in (src, tgt)}
        self._bpe = SubwordNMTBPE(SubwordNMTBPEConfig(bpe_codes=str(bpe_codes)))
        self.src, self.tgt = src, tgt

    def source(self, text: str) -> str:
        return self._bpe.encode(self._tok[self.src].encode(text.strip()))

    def target(self, text: str) -> str:
        return self._bpe.encode(self._tok[self.tgt].encode(text.strip()))


def read_prepared(folder: str | os.PathLike, langpair: str, splits=("train", "valid", "test")) -> dict[str, list]:
    """``{split: [Pair]}`` of a corpus prepared by fairseq's prepare-iwslt14.sh, as it is."""
    src, tgt = langpair.split("-")
    folder = local_path(folder)
    out = {}
    for split in splits:
        sources, refs = _lines(folder / f"{split}.{src}"), _lines(folder / f"{split}.{tgt}")
        if len(sources) != len(refs):
            raise ValueError(f"{folder}/{split}.{src} and .{tgt} differ in length ({len(sources)} vs {len(refs)})")
        out[split] = [translation_task.Pair(s, r) for s, r in zip(sources, refs)]
    return out


def load_splits(spec: dict) -> dict[str, list]:
    """``{split: examples}`` of an external model's ``data`` section: ``glue`` (a GLUE folder),
    ``prepared`` (a prepare-iwslt14.sh folder) or ``splits`` (sacrebleu test sets under
    ``folder``, preprocessed with ``bpe_codes``, by default the ``archive``'s)."""
    data = spec["data"]
    if "glue" in data:
        return read_glue(spec["task"], data["glue"])
    if "prepared" in data:
        return read_prepared(data["prepared"], data["langpair"])
    codes = local_path(data.get("bpe_codes") or Path(spec["archive"]) / "bpecodes")
    prep = Preprocessor(data["langpair"], codes)
    return {split: [translation_task.Pair(prep.source(s), prep.target(r))
                    for s, r in read_test_sets(data["folder"], sets, data["langpair"])]
            for split, sets in data["splits"].items()}


# ---- models ----------------------------------------------------------------------------------
def resolve_model(name: str) -> str:
    """A hub name or folder as ``from_pretrained`` should read it: the folder when ``name`` is
    one (absolute, or under the data folder), else the hub name itself."""
    for candidate in (Path(name).expanduser(), data_root() / name):
        if (candidate / "config.json").exists():
            return str(candidate)
    return name


def _in_hub_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on it
        return False
    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def load_fairseq_archive(folder: str | os.PathLike):
    """The model of a published fairseq archive (eval mode, CPU), built from the ``args`` in its
    ``model.pt`` with the dictionaries beside it. fairseq's own loader cannot open these files
    on torch >= 2.6 (``torch.load`` now refuses pickled ``argparse.Namespace``), so this reads
    the file itself and then lets fairseq upgrade old checkpoints as it always did."""
    from .fairseq_compat import import_fairseq

    import_fairseq()
    import torch
    from fairseq import checkpoint_utils
    from fairseq.data import Dictionary
    from fairseq.models.transformer import TransformerModel

    folder = local_path(folder)
    state = torch.load(folder / "model.pt", map_location="cpu", weights_only=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hydra's deprecation notices while old args are upgraded
        state = checkpoint_utils._upgrade_state_dict(state)
    cfg = state["cfg"]
    src, tgt = cfg.task.source_lang, cfg.task.target_lang
    task = types.SimpleNamespace(source_dictionary=Dictionary.load(str(folder / f"dict.{src}.txt")),
                                 target_dictionary=Dictionary.load(str(folder / f"dict.{tgt}.txt")))
    model = TransformerModel.build_model(cfg.model, task)
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return model.eval()


# ---- what a profile needs ---------------------------------------------------------------------
@dataclass(frozen=True)
class Need:
    model: str                 # the profile's model that needs it
    what: str                  # in words
    path: Path                 # where it is expected
    how: str                   # how to get it
    fetch: Callable[[], None] | None = None  # what `download` runs (None: by hand, see `how`)

    def present(self) -> bool:
        return self.path.exists()


def _glue_need(model: str, task: str, folder: str) -> Need:
    spec, path = GLUE[task], local_path(folder)

    def fetch() -> None:
        from datasets import load_dataset

        ds = load_dataset("nyu-mll/glue", spec.hub_config)
        write_glue(task, {ours: list(ds[theirs]) for ours, theirs in spec.hub_splits.items()}, path)

    return Need(model, f"GLUE {spec.folder} ({', '.join(spec.files.values())})", path / spec.files["train"],
                f"GLUE's {spec.folder} folder (e.g. from `datasets`: nyu-mll/glue, {spec.hub_config})", fetch)


def _test_set_need(model: str, folder: str, test_set: str, langpair: str) -> Need:
    src_path, ref_path = test_set_files(folder, test_set, langpair)

    def fetch() -> None:
        from sacrebleu.utils import get_reference_files, get_source_file

        src_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(get_source_file(test_set, langpair), src_path)
        shutil.copyfile(get_reference_files(test_set, langpair)[0], ref_path)

    return Need(model, f"test set {test_set} {langpair} (sacrebleu)", ref_path,
                f"`sacrebleu -t {test_set} -l {langpair} --echo src > {src_path}` and `--echo ref > {ref_path}`", fetch)


def _archive_need(model: str, folder: str) -> Need:
    path = local_path(folder)
    url = ARCHIVE_URLS.get(path.name)

    def fetch() -> None:
        archive = path.parent / f"{path.name}.tar.bz2"
        path.parent.mkdir(parents=True, exist_ok=True)
        urllib.request.urlretrieve(url, archive)
        with tarfile.open(archive) as tar:
            tar.extractall(path.parent, filter="data")
        archive.unlink()

    how = f"download and unpack {url}" if url else "a fairseq archive folder (model.pt, dict.*.txt, bpecodes)"
    return Need(model, f"fairseq model archive {path.name}", path / "model.pt", how, fetch if url else None)


def _hub_need(model: str, name: str) -> Need | None:
    resolved = resolve_model(name)
    if resolved != name or Path(name).is_absolute() or _in_hub_cache(name):
        return None
    target = data_root() / name

    def fetch() -> None:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=name, local_dir=target)

    return Need(model, f"Hugging Face model {name}", target / "config.json",
                f"`huggingface-cli download {name} --local-dir {target}`", fetch)


def needs(profile: dict) -> list[Need]:
    """Everything the external models of ``profile`` read (models with a ``data`` or ``archive``
    section, or a hub encoder), in profile order."""
    out: list[Need] = []
    for name, spec in (profile.get("models") or {}).items():
        data = spec.get("data") or {}
        if "glue" in data:
            out.append(_glue_need(name, spec["task"], data["glue"]))
        for split_sets in (data.get("splits") or {}).values():
            out += [_test_set_need(name, data["folder"], s, data["langpair"]) for s in split_sets]
        if "prepared" in data:
            folder = local_path(data["prepared"])
            out.append(Need(name, f"corpus {folder.name} prepared by fairseq's prepare-iwslt14.sh",
                            folder / f"train.{data['langpair'].split('-')[0]}",
                            "run fairseq's examples/translation/prepare-iwslt14.sh (it needs mosesdecoder and "
                            "subword-nmt) and put its output folder there"))
        if spec.get("archive"):
            out.append(_archive_need(name, spec["archive"]))
        for key in ("checkpoint", "encoder"):
            if spec.get(key) and "data" in spec and spec[key] not in ("minilm", "tiny-bert"):
                need = _hub_need(name, spec[key])
                out += [need] if need else []
                break
    return out


def check_local(profile: dict) -> None:
    """Raise ``MissingDownloadError`` listing every missing item of ``profile`` (see ``needs``)."""
    missing = [n for n in needs(profile) if not n.present()]
    if not missing:
        return
    lines = [f"- [{n.model}] {n.what}: expected at {n.path}\n    get it: {n.how}" for n in missing]
    raise MissingDownloadError(
        f"profile {profile['name']!r} reads {len(missing)} item(s) that are not on this machine, and the book "
        f"never downloads while it runs:\n" + "\n".join(lines) +
        f"\nOn a machine with internet, `{DOWNLOAD.format(profile=profile['name'])}` fetches them into "
        f"{data_root()} (${DATA_ENV}); copy that folder here. Or point the profile's path parameters "
        f"(models.<name>.data / archive / encoder / checkpoint) at your own copies.")


def download(profile: dict) -> list[Need]:
    """Fetch every missing item of ``profile`` that can be fetched; returns those left to do by hand."""
    from tqdm.auto import tqdm

    left = []
    for need in tqdm([n for n in needs(profile) if not n.present()], desc="download", unit="item"):
        if need.fetch is None:
            left.append(need)
            continue
        tqdm.write(f"[{need.model}] {need.what} -> {need.path}")
        need.fetch()
    return left


def main(argv: list[str] | None = None) -> int:
    from .runner import load_profile

    parser = argparse.ArgumentParser(description="List, check or download what a profile's models read.")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("action", choices=["list", "check", "download"])
    args = parser.parse_args(argv)
    profile = load_profile(args.profile)
    if args.action == "list":
        for n in needs(profile):
            print(f"{'ok     ' if n.present() else 'MISSING'} [{n.model}] {n.what}: {n.path}")
        return 0
    if args.action == "check":
        try:
            check_local(profile)
        except MissingDownloadError as err:
            print(err, file=sys.stderr)
            return 1
        print(f"everything profile {args.profile!r} reads is in place")
        return 0
    left = download(profile)
    for n in left:
        print(f"[{n.model}] {n.what}: do this by hand: {n.how}; expected at {n.path}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
