"""The paper profile's models and data, read from local files in their published formats.

Nothing in this module touches the network while the book runs. On a machine with internet,

    python -m helpers.book.running.downloads --profile paper download   # (make data PROFILE=paper)

fetches what the profile names into the data folder (``$SIXTEEN_HEADS_DATA``, default
``<repo>/data``); the GPU machine then needs only that folder. Every path in a profile's
``models`` section is a *path parameter*: absolute, or relative to the data folder, so
pointing one at your own copy is a one-line change (or a copied profile). What a profile
reads, and the message when something is missing, are in ``needs.py``.

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

Every sentence stays in the subword units the model reads, and each test pair keeps its raw
reference (``Pair.raw_ref``): chapters 03 to 05 score detokenized BLEU against it, as the
authors' ``wmt_ablation.sh`` did, and the pruning chapters tokenised BLEU on Moses tokens, as
their ``prune.py`` did (``metrics.BleuDefinition``).
"""

from __future__ import annotations

import csv
import os
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..base.atomic import atomic_path
from ..base.fairseq_compat import import_fairseq
from . import appendix_tasks, nli_task, translation_task
from .locations import data_root, local_path

ARCHIVE_URLS = {  # fairseq's README link for Ott et al. (2018), now on dl.fbaipublicfiles.com
    "wmt14.en-fr.joined-dict.transformer": "https://dl.fbaipublicfiles.com/fairseq/models/wmt14.en-fr.joined-dict.transformer.tar.bz2",
}


# ---- GLUE ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _GlueTask:
    folder: str  # GLUE's folder name
    files: dict[str, str]  # our split name -> GLUE file
    hub_splits: dict[str, str]  # our split name -> split of nyu-mll/glue in `datasets`
    hub_config: str


GLUE = {
    "nli": _GlueTask(
        "MNLI",
        {"train": "train.tsv", "matched": "dev_matched.tsv", "mismatched": "dev_mismatched.tsv"},
        {"train": "train", "matched": "validation_matched", "mismatched": "validation_mismatched"},
        "mnli",
    ),
    "sentiment": _GlueTask(
        "SST-2", {"train": "train.tsv", "valid": "dev.tsv"}, {"train": "train", "valid": "validation"}, "sst2"
    ),
    "acceptability": _GlueTask(
        "CoLA", {"train": "train.tsv", "valid": "dev.tsv"}, {"train": "train", "valid": "validation"}, "cola"
    ),
    "paraphrase": _GlueTask(
        "MRPC", {"train": "train.tsv", "valid": "dev.tsv"}, {"train": "train", "valid": "validation"}, "mrpc"
    ),
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
        return [
            nli_task.Example(r[a], r[b], nli_task.LABELS.index(r[y]), edit="") for r in rows if r[y] in nli_task.LABELS
        ]
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
            lines += [
                f"{i}\t{r['premise']}\t{r['hypothesis']}\t{nli_task.LABELS[r['label']]}"
                for i, r in enumerate(rows)
                if r["label"] >= 0
            ]
        elif task == "acceptability":
            lines += [f"glue\t{r['label']}\t\t{r['sentence']}" for r in rows]
        elif task == "sentiment":
            lines.append("sentence\tlabel")
            lines += [f"{r['sentence']}\t{r['label']}" for r in rows]
        else:
            lines.append("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String")
            lines += [
                f"{r['label']}\t{2 * i}\t{2 * i + 1}\t{r['sentence1']}\t{r['sentence2']}" for i, r in enumerate(rows)
            ]
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


def _read_test_sets(folder: str | os.PathLike, sets: list[str], langpair: str) -> list[tuple[str, str]]:
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
        import_fairseq()
        from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig
        from fairseq.data.encoders.subword_nmt_bpe import SubwordNMTBPE, SubwordNMTBPEConfig

        src, tgt = langpair.split("-")
        self._tok = {
            lang: MosesTokenizer(MosesTokenizerConfig(source_lang=lang, target_lang=lang)) for lang in (src, tgt)
        }
        self._bpe = SubwordNMTBPE(SubwordNMTBPEConfig(bpe_codes=str(bpe_codes)))
        self.src, self.tgt = src, tgt

    def source(self, text: str) -> str:
        return self._bpe.encode(self._tok[self.src].encode(text.strip()))

    def target(self, text: str) -> str:
        return self._bpe.encode(self._tok[self.tgt].encode(text.strip()))


def _read_prepared(folder: str | os.PathLike, langpair: str, splits=("train", "valid", "test")) -> dict[str, list]:
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
        return _read_prepared(data["prepared"], data["langpair"])
    codes = local_path(data.get("bpe_codes") or Path(spec["archive"]) / "bpecodes")
    prep = Preprocessor(data["langpair"], codes)
    return {
        split: [
            translation_task.Pair(prep.source(s), prep.target(r), raw_ref=r.strip())
            for s, r in _read_test_sets(data["folder"], sets, data["langpair"])
        ]
        for split, sets in data["splits"].items()
    }


# ---- models ----------------------------------------------------------------------------------
def resolve_model(name: str) -> str:
    """A hub name or folder as ``from_pretrained`` should read it: the folder when ``name`` is
    one (absolute, or under the data folder), else the hub name itself."""
    for candidate in (Path(name).expanduser(), data_root() / name):
        if (candidate / "config.json").exists():
            return str(candidate)
    return name


def in_hub_cache(name: str) -> bool:
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
    task = types.SimpleNamespace(
        source_dictionary=Dictionary.load(str(folder / f"dict.{src}.txt")),
        target_dictionary=Dictionary.load(str(folder / f"dict.{tgt}.txt")),
    )
    model = TransformerModel.build_model(cfg.model, task)
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return model.eval()
