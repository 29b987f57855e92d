"""Paraphrase pairs from templates and the task on them, for the method chapter (deterministic by seed).

Each pair says the same thing in two word orders (active/passive, fronted clause), so a
sentence encoder must align words across positions to embed both alike.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

_AGENTS = [
    "the teacher",
    "a doctor",
    "the old farmer",
    "my sister",
    "the pilot",
    "a young student",
    "the baker",
    "our neighbour",
]
_OBJECTS = [
    "the letter",
    "a small boat",
    "the red car",
    "the report",
    "a wooden chair",
    "the garden",
    "an old map",
    "the window",
]
VERBS = [
    ("painted", "was painted"),
    ("repaired", "was repaired"),
    ("found", "was found"),
    ("sold", "was sold"),
    ("cleaned", "was cleaned"),
    ("described", "was described"),
]
_TIMES = ["yesterday", "last week", "on monday", "this morning", "after lunch"]


def paraphrase_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` pairs (sentence, paraphrase)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        agent, obj, (active, passive), time = (
            rng.choice(_AGENTS),
            rng.choice(_OBJECTS),
            rng.choice(VERBS),
            rng.choice(_TIMES),
        )
        a = f"{agent} {active} {obj} {time}."
        b = rng.choice([f"{obj} {passive} by {agent} {time}.", f"{time}, {agent} {active} {obj}."])
        pairs.append((a.capitalize(), b.capitalize()))
    return pairs


@dataclass
class PairTask:
    """Chapter 01's task on a sentence encoder: a sentence and its paraphrase should embed alike.

    ``embed(model, sentences)``: the mean-pooled last hidden states, ``[batch, d_model]``;
    ``loss(model, batch)``: per pair, ``1 - cos(e(a), e(b))``, ``[batch]`` (one loss per example,
    as ``head_importance`` wants); ``mean_loss(model)``: over every pair, without gradients;
    ``batches``: the pairs in batches of ``batch_size``."""

    tokenizer: Any
    pairs: Sequence[tuple[str, str]]
    batch_size: int = 32

    @property
    def batches(self) -> list[Sequence[tuple[str, str]]]:
        return [self.pairs[i : i + self.batch_size] for i in range(0, len(self.pairs), self.batch_size)]

    def embed(self, model, sentences: Sequence[str]) -> torch.Tensor:
        enc = self.tokenizer(list(sentences), padding=True, return_tensors="pt")
        hidden = model(**enc).last_hidden_state  # [batch, tokens, d_model]
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1)  # [batch, d_model]

    def loss(self, model, batch: Sequence[tuple[str, str]]) -> torch.Tensor:
        a, b = zip(*batch)
        return 1 - F.cosine_similarity(self.embed(model, a), self.embed(model, b))  # [batch]

    def mean_loss(self, model) -> float:
        with torch.no_grad():
            return torch.cat([self.loss(model, b) for b in self.batches]).mean().item()
