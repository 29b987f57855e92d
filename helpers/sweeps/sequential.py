"""Stop when decided: a head's equivalence class read at two looks at the examples.

A one-head sweep evaluates every head on every example, though most heads' class (harmful,
negligible, helpful; ``significance.equivalence_class``) is settled long before the last one. A
two-look design evaluates every head on a first share of the examples, drawn at random
(``look_split``), and only the heads still undetermined there on the rest:

* look 1: the paired bootstrap on the first share, its interval and p-value at ``alpha / 2``;
  a head whose interval lies wholly inside (-δ, δ) or wholly beyond one of the margins stops here,
  with this look's row;
* look 2: every other head on all the examples, again at ``alpha / 2``.

Splitting alpha between the looks (Bonferroni) bounds each error at its nominal level whatever
the looks' correlation. The bounds are per direction: a head whose true change lies on a
margin is called negligible (or, with no change, significant in one given direction) at look 1
with probability at most alpha/2 and at look 2 with at most alpha/2, so at most alpha over both
looks in that direction; a head with no change is called significant in either direction at
most 2·alpha of the time, as one look at alpha does (``significance.chance_flag_rate``). The
price is power: each look tests at half the level, so a head placed by a one-look test at alpha
with little room to spare may stay undetermined. ``tests/test_sequential.py`` simulates the rates.

A head that stops at the first look rests on fewer examples than one that goes on: where heads
are compared with each other (``head_effects.best_per_layer``) they are compared on the first
look's examples, which all of them have.
"""

from __future__ import annotations

import numpy as np

from ..heads.significance import equivalence_class

_LOOK_ALPHA_SHARE = 0.5  # of alpha, per look (two looks)


def look_split(n: int, first_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``0..n-1`` in two sorted parts: ``first_share`` of them drawn at random with
    ``seed`` (the first look's examples), and the rest. A prefix would not do: generated splits
    are filled label by label."""
    if not 0 < first_share < 1:
        raise ValueError(f"first_share must lie strictly between 0 and 1, got {first_share!r}")
    first = np.sort(np.random.default_rng(seed).choice(n, size=max(1, round(first_share * n)), replace=False))
    rest = np.setdiff1d(np.arange(n), first)
    return first, rest


def look_alpha(alpha: float) -> float:
    """The level each of the two looks tests at."""
    return alpha * _LOOK_ALPHA_SHARE


def settled(low: float, high: float, margin: float) -> bool:
    """Whether the interval ``[low, high]`` of a change is placed against ``margin``: harmful,
    negligible or helpful (``significance.equivalence_class``), not undetermined."""
    return equivalence_class(low, high, margin) != "undetermined"
