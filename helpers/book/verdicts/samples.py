"""What a verdict rests on, in words, read from the tables the verdict reads: the units a test
ran on and the smallest effect it could detect there (``Claim.sample``; the scorecard shows it
beside the verdict). One function per kind of evidence; the chapters' rules pick theirs."""

from __future__ import annotations

import json
import math

import pandas as pd

from ...heads.significance import mean_rank_null
from ..store.columns import RANDOM_HIGH
from .engine import IDENTITY_COLUMNS, ours


def one_head(table: pd.DataFrame) -> str:
    """A counts table of one-head tests (columns ``examples``, ``resolution``, ``unit``), per
    model: the examples and the resolution (the change a head must make to be called significant
    half of the time, ``head_effects.resolution``), e.g. ``"translation: n = 400, ±0.004 nats"``,
    and how many rows rest on a first look's examples only (``head_effects.sample_columns``);
    "" for a table from before those were recorded."""
    table = ours(table)
    if not {"examples", "resolution", "unit"} <= set(table.columns) or table["examples"].isna().all():
        return ""
    model = next(c for c in IDENTITY_COLUMNS if c in table)
    parts = []
    for name, part in table.groupby(model, sort=False):
        unit = " or ".join(dict.fromkeys(part["unit"].astype(str)))
        parts.append(
            f"{str(name).removeprefix('model ')}: n = {int(part['examples'].max()):,}{_first_look(part)}, "
            f"±{part['resolution'].median():.2g} {unit}"
        )
    return "; ".join(parts)


def _first_look(part: pd.DataFrame) -> str:
    """How many of the rows counted rest on the first look's examples only (two looks), e.g.
    ``" (31 of 144 rows on the first look's 250)"``; "" where none do or the table does not say."""
    if "first_look_rows" not in part or not part["first_look_rows"].fillna(0).sum():
        return ""
    rows = int(part["first_look_rows"].sum())
    total = int(part["heads"].sum() if "heads" in part else part["layers"].sum())
    return f" ({rows} of {total} rows on the first look's {int(part['first_look_examples'].min()):,})"


def curves(table: pd.DataFrame, by: str = "model", what: str = "shares") -> str:
    """Pruning curves (columns ``examples``, ``step``; ``random_orders`` on a summary's band rows),
    per ``by`` (a model; one line where the table has no such column): the examples each step is
    scored on, the step (a prunable share is read to that resolution) and the random orders of
    the band, e.g. ``"nli: n = 500, shares in steps of 10%, 20 random orders"``."""
    if not {"examples", "step"} <= set(table.columns):
        return ""
    groups = table.groupby(by, sort=False) if by in table else [("", table)]
    parts = []
    for name, part in groups:
        band = (
            part.loc[part["order"] == RANDOM_HIGH, "random_orders"]
            if {"order", "random_orders"} <= set(part)
            else None
        )
        parts.append(
            f"{name + ': ' if name else ''}n = {int(part['examples'].max()):,}, {what} in steps of "
            f"{part['step'].max():.0%}"
            + (f", {int(band.max())} random orders" if band is not None and band.notna().any() else "")
        )
    return "; ".join(parts)


def correlation(table: pd.DataFrame, level: float = 0.01) -> str:
    """Per model: the heads correlated and the smallest |r| a two-sided test at ``level`` calls
    significant with that many (t with n - 2 degrees of freedom)."""
    from scipy.stats import t

    parts = []
    for name, part in table.groupby("model", sort=False):
        n = int(part["heads"].max())  # the row of all kinds together, or a model's only kind
        critical = t.ppf(1 - level / 2, n - 2)
        parts.append(
            f"{name}: n = {n} heads, |r| >= {critical / math.sqrt(n - 2 + critical**2):.2f} detectable at p < {level}"
        )
    return "; ".join(parts)


def timing(table: pd.DataFrame) -> str:
    """A speed table (``median``, ``iqr``, ``runs``): the timed passes and the timing noise."""
    noise = (table["iqr"] / table["median"]).max()
    runs = table["runs"].map(lambda r: len(json.loads(r)) if isinstance(r, str) else 0).min()
    return f"{runs} timed passes per variant and batch; timing noise up to {noise:.1%} (IQR / median)"


def mean_rank(k: int, total: int, level: float) -> str:
    """A permutation test on the mean rank of ``k`` items of ``total``: the smallest mean rank it
    calls further down than chance at ``level`` (the same null as ``significance.mean_rank_p``)."""
    threshold = float(pd.Series(mean_rank_null(k, total)).quantile(1 - level))
    return f"{k} heads of {total}; a mean rank beyond {threshold:.0f} is detectable at p < {level}"
