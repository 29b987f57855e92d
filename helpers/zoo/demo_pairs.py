"""Paraphrase pairs from templates, for the method chapter (deterministic by seed).

Each pair says the same thing in two word orders (active/passive, fronted clause), so a
sentence encoder must align words across positions to embed both alike.
"""
from __future__ import annotations

import random

AGENTS = ["the teacher", "a doctor", "the old farmer", "my sister", "the pilot", "a young student", "the baker", "our neighbour"]
OBJECTS = ["the letter", "a small boat", "the red car", "the report", "a wooden chair", "the garden", "an old map", "the window"]
VERBS = [("painted", "was painted"), ("repaired", "was repaired"), ("found", "was found"), ("sold", "was sold"),
         ("cleaned", "was cleaned"), ("described", "was described")]
TIMES = ["yesterday", "last week", "on monday", "this morning", "after lunch"]


def paraphrase_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` pairs (sentence, paraphrase)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        agent, obj, (active, passive), time = rng.choice(AGENTS), rng.choice(OBJECTS), rng.choice(VERBS), rng.choice(TIMES)
        a = f"{agent} {active} {obj} {time}."
        b = rng.choice([f"{obj} {passive} by {agent} {time}.", f"{time}, {agent} {active} {obj}."])
        pairs.append((a.capitalize(), b.capitalize()))
    return pairs
