"""§3.2, masking one head at a time: the counts of Table 1's headline, per model, seed and kind.

``counts`` takes each model's stacked one-head effects (``HeadSweeps.effects(..., "one_head")``)
and counts every training run on its own rows (``head_effects.significance_counts``), so no
model's or run's rows reach another's; ``with_paper`` adds the paper's WMT Enc-Enc row
(``from_paper`` True).
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .. import paper_values
from ..head_effects import significance_counts


def counts(models: Sequence[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """One row per model, training seed and attention kind: ``heads``, ``significant``,
    ``significant_up``, ``largest_drop``, ``largest_gain`` (``significance_counts``), with
    ``model``, ``training_seed`` and ``from_paper`` (False) first."""
    out = pd.concat([significance_counts(part).assign(model=name, training_seed=s, from_paper=False)
                     for name, effects in models for s, part in effects.groupby("training_seed")], ignore_index=True)
    return out[["model", "training_seed", *out.columns.drop(["model", "training_seed"])]]


def paper_row() -> dict:
    """The paper's count for WMT's encoder self-attention (Table 1: 8 of 96, 4 of them gains)."""
    table1 = paper_values.table(1)
    return {"model": "WMT", "from_paper": True, "kind": "enc_self", "heads": 96,
            "significant": paper_values.SIGNIFICANT_ENC_SELF, "significant_up": paper_values.SIGNIFICANT_ENC_SELF_UP,
            "largest_drop": table1["delta"].min(), "largest_gain": table1["delta"].max()}


def with_paper(ours: pd.DataFrame) -> pd.DataFrame:
    """``ours`` (from ``counts``) with the paper's row below."""
    return pd.concat([ours, pd.DataFrame([paper_row()])], ignore_index=True)


def by_seed(table: pd.DataFrame) -> pd.DataFrame:
    """Our rows of a counts table as ``significant (up) of heads``, one column per training seed."""
    ours = table[~table["from_paper"].astype(bool)]
    cell = (ours["significant"].astype(int).astype(str) + " (" + ours["significant_up"].astype(int).astype(str)
            + " up) of " + ours["heads"].astype(int).astype(str))
    return (ours.assign(cell=cell).pivot(index=["model", "kind"], columns="training_seed", values="cell")
            .rename(columns=lambda s: f"seed {int(s)}"))


def both_measures(metric: pd.DataFrame, likelihood: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The significant counts on the paper's metric and on the likelihood side by side, per model,
    seed and kind, with the count a test at ``alpha`` flags by chance among heads with no effect."""
    keys = ["model", "training_seed", "kind"]
    ours = metric[~metric["from_paper"].astype(bool)]
    both = ours[keys + ["heads", "significant", "significant_up"]].merge(
        likelihood[keys + ["significant", "significant_up"]], on=keys,
        suffixes=(" (the paper's metric)", " (the likelihood)"))
    both.insert(4, "expected by chance", both["heads"] * alpha)
    return both
