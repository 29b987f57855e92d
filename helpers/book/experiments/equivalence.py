"""Unimportant or unmeasured: each head's change placed against a margin δ.

A significance test says which changes are *not zero*; with a weak score almost every head
passes as "unimportant", with a strong one almost none does. An equivalence test says which
changes are *small*: a head is ``negligible`` when the whole interval of its change (two
one-sided tests at alpha, ``delta_low`` to ``delta_high`` of ``head_effects.effect_rows``) lies
within ±δ, ``harmful`` (``helpful``) when it lies beyond -δ (+δ), and ``undetermined`` when the
interval straddles a margin: the data cannot place it (``heads.significance.equivalence_class``).

The margins, one per score, are a chapter parameter ``margins``:

* ``BLEU``: 1 point, the paper's "noticeable" loss (§4.2 reads its curves so);
* ``accuracy``: 1 point (0.01), the same for a classifier;
* ``perplexity``: 1% of the perplexity, for both likelihoods: a change of log(1.01) nats in the
  mean log-likelihood per target token (translation) or in the gold label's mean log-probability
  (classifier), whose exponent is a perplexity over the labels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist

import numpy as np
import pandas as pd

from ...heads.significance import EQUIVALENCE_CLASSES, equivalence_class

DEFAULT_MARGINS = {"BLEU": 1.0, "accuracy": 0.01, "perplexity": 0.01}


def margin(track: str, measure: str, margins: Mapping[str, float]) -> float:
    """δ in the unit of the effects' ``delta``: ``margins["perplexity"]`` as log(1 + share) nats
    for the likelihood, else BLEU points (``track`` "translation") or an accuracy fraction."""
    unknown = set(margins) - set(DEFAULT_MARGINS)
    if unknown:
        raise ValueError(f"unknown margin(s) {sorted(unknown)}: the margins are {sorted(DEFAULT_MARGINS)}")
    given = {**DEFAULT_MARGINS, **margins}
    if measure == "likelihood":
        return math.log1p(given["perplexity"])
    return given["BLEU"] if track == "translation" else given["accuracy"]


def classes(effects: pd.DataFrame, delta: float) -> pd.Series:
    """Each row's class against the margin ``delta``; a row without an interval is undetermined."""
    if "delta_low" not in effects:
        return pd.Series("undetermined", index=effects.index)
    return pd.Series(
        [
            equivalence_class(lo, hi, delta) if pd.notna(lo) and pd.notna(hi) else "undetermined"
            for lo, hi in zip(effects["delta_low"], effects["delta_high"])
        ],
        index=effects.index,
    )


def class_counts(effects: pd.DataFrame, delta: float) -> dict[str, int]:
    """``{class: heads}`` of ``effects`` (one model's, one run's, one kind's rows) for every class."""
    return {name: n for name, n in placement(effects, delta).items() if name in EQUIVALENCE_CLASSES}


def placement(effects: pd.DataFrame, delta: float) -> dict[str, int]:
    """``class_counts`` and ``unplaced``: the heads that neither test places (not significant, and
    undetermined against ``delta``), from one classification of the rows."""
    found = classes(effects, delta)
    counts = found.value_counts()
    unplaced = (found == "undetermined") & ~effects["significant"].astype(bool)
    return {**{name: int(counts.get(name, 0)) for name in EQUIVALENCE_CLASSES}, "unplaced": int(unplaced.sum())}


def examples_to_decide(effects: pd.DataFrame, delta: float, alpha: float, power: float = 0.8) -> int:
    """The examples that would place, with probability ``power``, every row ``placement`` leaves
    unplaced, were its change to stay where it is and its interval to narrow as 1 / sqrt(examples).
    A row resting on ``n`` examples with half-width ``w`` at change ``d`` has room ``r``, the
    larger of ``|d|`` (to be significant) and ``delta - |d|`` (to lie within ±delta); its interval
    (the alpha and 1 - alpha quantiles, alpha / 2 for a row of two looks: ``look``) places it
    when the half-width plus the estimate's own spread at ``power`` fit in the room, so it needs
    ``n (w / r)^2 (1 + z(power) / z(1 - alpha))^2`` (at 50% power, ``n (w / r)^2``). The most any
    unplaced row needs; 0 where none is unplaced; rows need ``examples``."""
    found = classes(effects, delta)
    open_ = effects[(found == "undetermined").to_numpy() & ~effects["significant"].astype(bool).to_numpy()]
    if open_.empty:
        return 0
    half = (open_["delta_high"] - open_["delta_low"]).to_numpy(float) / 2
    size = open_["delta"].abs().to_numpy(float)
    room = np.maximum(size, delta - size)
    looked = open_["look"].notna().to_numpy() if "look" in open_ else np.zeros(len(open_), bool)
    z = np.where(looked, NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(1 - alpha))
    spread = (1 + NormalDist().inv_cdf(power) / z) ** 2
    return int(np.ceil((open_["examples"].to_numpy(float) * (half / room) ** 2 * spread).max()))
