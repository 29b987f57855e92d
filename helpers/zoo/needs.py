"""What a profile's external models read, whether it is on this machine, and how to fetch it.

``needs(profile)`` lists every file the paper profile's models and data come from (GLUE
folders, sacrebleu test sets, a fairseq archive, Hugging Face models, a prepared corpus);
``check_local`` raises one ``MissingDownloadError`` naming each missing item, where it is
expected and how to get it; ``download`` fetches what can be fetched (the only code in the
project that uses the network; the book never calls it while it runs).
"""

from __future__ import annotations

import shutil
import tarfile
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from . import registry
from .locations import DATA_ENV, MissingDownloadError, data_root, hub_download_command, local_path
from .paper_sources import ARCHIVE_URLS, GLUE, in_hub_cache, resolve_model, test_set_files, write_glue

_DOWNLOAD = "python -m helpers.book.running.downloads --profile {profile} download"  # the command that fetches


@dataclass(frozen=True)
class _Need:
    model: str  # the profile's model that needs it
    what: str  # in words
    path: Path  # where it is expected
    how: str  # how to get it
    fetch: Callable[[], None] | None = None  # what `download` runs (None: by hand, see `how`)

    def present(self) -> bool:
        return self.path.exists()


def _glue_need(model: str, task: str, folder: str) -> _Need:
    spec, path = GLUE[task], local_path(folder)

    def fetch() -> None:
        from datasets import load_dataset

        ds = load_dataset("nyu-mll/glue", spec.hub_config)
        write_glue(task, {ours: list(ds[theirs]) for ours, theirs in spec.hub_splits.items()}, path)

    return _Need(
        model,
        f"GLUE {spec.folder} ({', '.join(spec.files.values())})",
        path / spec.files["train"],
        f"GLUE's {spec.folder} folder (e.g. from `datasets`: nyu-mll/glue, {spec.hub_config})",
        fetch,
    )


def _test_set_need(model: str, folder: str, test_set: str, langpair: str) -> _Need:
    src_path, ref_path = test_set_files(folder, test_set, langpair)

    def fetch() -> None:
        from sacrebleu.utils import get_reference_files, get_source_file

        src_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(get_source_file(test_set, langpair), src_path)
        shutil.copyfile(get_reference_files(test_set, langpair)[0], ref_path)

    return _Need(
        model,
        f"test set {test_set} {langpair} (sacrebleu)",
        ref_path,
        f"`sacrebleu -t {test_set} -l {langpair} --echo src > {src_path}` and `--echo ref > {ref_path}`",
        fetch,
    )


def _archive_need(model: str, folder: str) -> _Need:
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
    return _Need(model, f"fairseq model archive {path.name}", path / "model.pt", how, fetch if url else None)


_HUB_TEXT_FILES = (".json", ".txt", ".model")  # configs, tokenizers, vocabularies, sentencepiece models


def pytorch_files(repo_files: list[str]) -> list[str]:
    """The files of a Hugging Face model repository (``repo_files``: its paths) that PyTorch
    needs: the top-level configs and tokenizer files, and the weights as safetensors when the
    repository has them, else as ``pytorch_model*.bin``. TensorFlow, Flax, ONNX, Rust and
    Core ML copies of the weights (``bert-base-uncased`` holds five) are left out."""
    top = [f for f in repo_files if "/" not in f]
    safetensors = [f for f in top if f.endswith(".safetensors") or f.endswith(".safetensors.index.json")]
    weights = safetensors or [
        f for f in top if f.startswith("pytorch_model") and f.endswith((".bin", ".bin.index.json"))
    ]
    if not weights:
        raise ValueError(
            f"the repository's files {sorted(top)} hold no PyTorch weights (.safetensors or pytorch_model.bin)"
        )
    text = [f for f in top if f.endswith(_HUB_TEXT_FILES) and f not in weights]
    return sorted(set(text) | set(weights))


def _hub_need(model: str, name: str) -> _Need | None:
    resolved = resolve_model(name)
    if resolved != name or Path(name).is_absolute() or in_hub_cache(name):
        return None
    target = data_root() / name

    def fetch() -> None:
        from huggingface_hub import HfApi, snapshot_download

        files = pytorch_files(HfApi().list_repo_files(name))
        snapshot_download(repo_id=name, local_dir=target, allow_patterns=files)

    return _Need(
        model,
        f"Hugging Face model {name}",
        target / "config.json",
        f"`{hub_download_command(name, target)}`",
        fetch,
    )


def needs(models: Mapping[str, dict]) -> list[_Need]:
    """Everything the external models among ``models`` (a profile's ``models``: name -> spec) read
    (models with a ``data`` or ``archive`` section, or a hub encoder), in profile order."""
    out: list[_Need] = []
    for name, spec in models.items():
        data = spec.get("data") or {}
        if "glue" in data:
            out.append(_glue_need(name, spec["task"], data["glue"]))
        for split_sets in (data.get("splits") or {}).values():
            out += [_test_set_need(name, data["folder"], s, data["langpair"]) for s in split_sets]
        if "prepared" in data:
            folder = local_path(data["prepared"])
            out.append(
                _Need(
                    name,
                    f"corpus {folder.name} prepared by fairseq's prepare-iwslt14.sh",
                    folder / f"train.{data['langpair'].split('-')[0]}",
                    "run fairseq's examples/translation/prepare-iwslt14.sh (it needs mosesdecoder and "
                    "subword-nmt) and put its output folder there",
                )
            )
        if spec.get("archive"):
            out.append(_archive_need(name, spec["archive"]))
        for key in ("checkpoint", "encoder"):
            if spec.get(key) and "data" in spec and registry.needs_download(spec[key]):
                need = _hub_need(name, spec[key])
                out += [need] if need else []
                break
    return out


def check_local(profile: str, models: Mapping[str, dict]) -> None:
    """Raise ``MissingDownloadError`` listing every missing item of ``models`` of profile
    ``profile`` (see ``needs``)."""
    missing = [n for n in needs(models) if not n.present()]
    if not missing:
        return
    lines = [f"- [{n.model}] {n.what}: expected at {n.path}\n    get it: {n.how}" for n in missing]
    raise MissingDownloadError(
        f"profile {profile!r} reads {len(missing)} item(s) that are not on this machine, and the book "
        f"never downloads while it runs:\n"
        + "\n".join(lines)
        + f"\nOn a machine with internet, `{_DOWNLOAD.format(profile=profile)}` fetches them into "
        f"{data_root()} (${DATA_ENV}); copy that folder here. Or point the profile's path parameters "
        f"(models.<name>.data / archive / encoder / checkpoint) at your own copies."
    )


def download(models: Mapping[str, dict]) -> list[_Need]:
    """Fetch every missing item of ``models`` that can be fetched; returns those left to do by hand."""
    from tqdm.auto import tqdm

    left = []
    for need in tqdm([n for n in needs(models) if not n.present()], desc="download", unit="item"):
        if need.fetch is None:
            left.append(need)
            continue
        tqdm.write(f"[{need.model}] {need.what} -> {need.path}")
        need.fetch()
    return left
