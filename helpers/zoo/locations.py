"""Where models and data live on disk, and the error raised when something is not there.

* ``data_root()``: the paper profile's downloads, ``$SIXTEEN_HEADS_DATA`` or ``<repo>/data``;
* ``cache_root()``: models generated and trained here, ``$SIXTEEN_HEADS_CACHE`` or
  ``<repo>/.cache/models``;
* ``converted_root()``: models an installed package ships, converted once to a faster format
  (SmolLM2's GGUF file), ``$SIXTEEN_HEADS_CONVERTED`` or ``<repo>/.cache/converted``. Apart from
  ``cache_root()`` so that runs with another model cache share them.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA_ENV = "SIXTEEN_HEADS_DATA"
_CACHE_ENV = "SIXTEEN_HEADS_CACHE"
CONVERTED_ENV = "SIXTEEN_HEADS_CONVERTED"


class MissingDownloadError(FileNotFoundError):
    """A model or data set must be downloaded first and this machine is offline."""


def hub_download_command(name: str, target: str | os.PathLike) -> str:
    """The shell command that fetches hub model ``name`` into folder ``target`` with its configs,
    tokenizer files and safetensors weights only, not the repository's TensorFlow, Flax or ONNX
    copies (``needs.pytorch_files`` chooses the same files, with a fallback to ``.bin`` weights)."""
    return f"huggingface-cli download {name} --include '*.json' '*.txt' '*.model' '*.safetensors' --local-dir {target}"


def data_root() -> Path:
    """``$SIXTEEN_HEADS_DATA`` or ``<repo>/data``."""
    return Path(os.environ.get(DATA_ENV, REPO / "data"))


def local_path(path: str | os.PathLike) -> Path:
    """``path`` as given when absolute, else under ``data_root()``."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else data_root() / path


def converted_root() -> Path:
    """``$SIXTEEN_HEADS_CONVERTED`` or ``<repo>/.cache/converted``."""
    return Path(os.environ.get(CONVERTED_ENV, REPO / ".cache" / "converted"))


def cache_root() -> Path:
    """``$SIXTEEN_HEADS_CACHE`` or ``<repo>/.cache/models``."""
    return Path(os.environ.get(_CACHE_ENV, REPO / ".cache" / "models"))


_PRIVATE_SWEEPS_ENV = "SIXTEEN_HEADS_PRIVATE_SWEEPS"
CHAPTER_ENV = "SIXTEEN_HEADS_CHAPTER"


def sweeps_scope(folder: Path) -> Path:
    """``folder`` (a model's sweep cache), or with ``$SIXTEEN_HEADS_PRIVATE_SWEEPS=1`` its subfolder
    for the chapter running (``$SIXTEEN_HEADS_CHAPTER``, which the runner sets): no chapter then
    reads another's sweeps, so a build computes every evaluation wherever it is asked for. For
    checking that sharing changes no result; the book shares."""
    if os.environ.get(_PRIVATE_SWEEPS_ENV) == "1":
        return folder / os.environ.get(CHAPTER_ENV, "outside-a-chapter")
    return folder
