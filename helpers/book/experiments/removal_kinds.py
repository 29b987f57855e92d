"""Three ways to remove a head (chapter 12): zero (the paper's mask), mean and resample ablation
(helpers/heads/removal.py), compared on the same heads, models and examples.

    effects = by_removal(sweeps, "nli", examples, reference, "likelihood")   # every seed and kind
    table = agreement(effects)          # Spearman between kinds, overlap of the 10 most important

The reference set (the means, the donors) is drawn from a split the scores never see. The
translation model is scored by likelihood only: mean and resample ablation replace a head's
output position by position, which step-by-step decoding cannot do.
"""
from __future__ import annotations

import math
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ...heads.removal import REMOVAL_KINDS
from . import one_head
from .sweeps import HeadSweeps

TOP = 10  # "the 10 most important heads": those whose removal lowers the score most


def by_removal(sweeps: HeadSweeps, name: str, examples: Sequence, reference: Sequence, measure: str,
               kinds: Sequence[str] = REMOVAL_KINDS) -> pd.DataFrame:
    """One-head effects of every training run of ``name`` under each removal kind, stacked with
    ``removal`` and ``training_seed`` (``head_effects``' columns)."""
    return pd.concat([sweeps.effects(name, examples, "one_head", measure, (kind, reference)).assign(removal=kind)
                      for kind in kinds], ignore_index=True)


def language_model_effects(grid: pd.DataFrame, removal: str) -> pd.DataFrame:
    """Chapter 11's one-head grid (``language_model.one_head_grid``) as effect rows: ``delta`` is
    the change of the mean log-likelihood per token, -log(masked / unmasked perplexity), nats."""
    delta = -np.log1p(grid["change_pct"] / 100)
    return pd.DataFrame({"kind": "self", "layer": grid["layer"], "head": grid["head"], "heads": [[h] for h in grid["head"]],
                         "delta": delta, "p_value": grid["p_value"], "significant": grid["significant"],
                         "delta_low": grid["delta_low"], "delta_high": grid["delta_high"], "removal": removal,
                         "training_seed": 0})


def counts(models: Sequence[tuple[str, pd.DataFrame]], margins: Mapping[str, float], measure: str) -> pd.DataFrame:
    """Chapter 03's counts table (``one_head.counts``: significant, and each equivalence class against
    δ) per model, seed and attention kind, once per removal kind (a ``removal`` column)."""
    return pd.concat([one_head.counts([(name, part.drop(columns="removal"))], margins, measure).assign(removal=kind)
                      for name, effects in models for kind, part in effects.groupby("removal", sort=False)],
                     ignore_index=True)


def agreement(models: Sequence[tuple[str, pd.DataFrame]], top: int = TOP) -> pd.DataFrame:
    """Per model, training seed and pair of removal kinds: the Spearman correlation of the heads'
    changes, and how many of the ``top`` heads whose removal lowers the score most are the same."""
    rows = []
    for name, effects in models:
        for seed, part in effects.groupby("training_seed"):
            by_kind = {k: p.set_index(["kind", "layer", "head"])["delta"] for k, p in part.groupby("removal", sort=False)}
            for a, b in combinations(by_kind, 2):
                x, y = by_kind[a].align(by_kind[b], join="inner")
                rows.append({"model": name, "training_seed": int(seed), "kinds": f"{a} vs {b}", "heads": len(x),
                             "spearman": spearman(x.to_numpy(), y.to_numpy()),
                             f"top {top} shared": len(set(x.nsmallest(top).index) & set(y.nsmallest(top).index))})
    return pd.DataFrame(rows)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); nan when either side is constant."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def class_table(counts_table: pd.DataFrame) -> pd.DataFrame:
    """Per model, seed and removal kind (attention kinds summed): heads, significant, negligible,
    harmful, helpful, undetermined."""
    columns = ["heads", "significant", "negligible", "harmful", "helpful", "undetermined"]
    return (counts_table.groupby(["model", "training_seed", "removal"], sort=False)[columns].sum().reset_index())
