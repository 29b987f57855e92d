"""Chapter 13b's "What this run shows" paragraph: what removing heads breaks (see
``helpers.book.verdicts.findings``)."""

from __future__ import annotations

import pandas as pd

from ...experiments.buys_and_breaks import BAND_ORDER, COPYING_FLOOR, KEPT_LEVEL
from ...store.columns import (
    COPYING_KEPT,
    COPYING_TOLERANCES,
    INDUCTION_TOP,
    UNPRUNED_COPYING,
    VERDICT_SEQUENCES,
    copying_at,
    copying_below,
    copying_kept_interval,
    prunable_within,
    random_copying_at,
    random_orders_at,
)
from ..rules.ch13b import COPYING_PERPLEXITY
from .text import read, words


def _share(x: float) -> str:
    return f"{x:.0%}"


def induction_lines(profile: str) -> list[str]:
    """Where the strongest induction heads rank by each importance."""
    ranks = read(profile, "13b_induction")
    top = ranks.nsmallest(INDUCTION_TOP, "induction rank")
    heads = len(ranks)
    by = [c for c in ranks.columns if c.startswith("rank by ")]
    named = words([f"{int(r['layer'])}.{int(r['head'])} ({r['induction score']:.2f})" for _, r in top.iterrows()])
    where = words([f"{c[len('rank by ') :]}: {', '.join(str(int(v)) for v in top[c])} of {heads}" for c in by])
    return [
        f"**Induction heads:** the {INDUCTION_TOP} strongest (layer.head, score) are {named}. Their ranks (1 = most "
        f"important) by {where}."
    ]


def copying_lines(profile: str) -> list[str]:
    """Per order: what each perplexity tolerance allows pruned, and copying there."""
    summary = read(profile, "13b_copying_summary").set_index("order")
    below = copying_below(COPYING_FLOOR)
    lines = []
    for order, row in summary.iterrows():
        fall = (
            "never falls below half of it"
            if pd.isna(row[below])
            else f"falls below half of it from {_share(row[below])} pruned"
        )
        allowed = "; ".join(
            f"within {t:.0%} of the verse perplexity {_share(row[prunable_within(t)])} of the query "
            f"heads can go, copying accuracy there {row[copying_at(t)]:.2f}"
            for t in COPYING_TOLERANCES
        )
        lines.append(f"**{order}:** {allowed} (unpruned {row[UNPRUNED_COPYING]:.2f}); copying accuracy {fall}.")
    if BAND_ORDER in summary.index and summary.loc[BAND_ORDER, UNPRUNED_COPYING] > 0:
        row, t = summary.loc[BAND_ORDER], COPYING_PERPLEXITY  # the tolerance the copying rule reads
        base = row[UNPRUNED_COPYING]
        low, high = (row.get(random_copying_at(t, q)) for q in ("5%", "95%"))
        band = (
            ""
            if low is None or pd.isna(low)
            else f"; {int(row[random_orders_at(t)])} random orders pruning as many heads keep {low / base:.0%} to "
            f"{high / base:.0%} of it (5th to 95th percentile)"
        )
        kept = row.get(COPYING_KEPT.format(t))
        interval = (
            ""
            if kept is None or pd.isna(kept)
            else f" On a probe of its own ({int(row[VERDICT_SEQUENCES])} sequences), the same pruning keeps "
            f"{kept:.0%} "
            f"[{row[copying_kept_interval(t, 'low')]:.0%}, {row[copying_kept_interval(t, 'high')]:.0%}] "
            f"(a paired bootstrap interval over sequences, calibrated to cover {KEPT_LEVEL:.0%})."
        )
        lines.append(
            f"**Pruning for perplexity, seen by copying:** at the share that keeps the verse perplexity within "
            f"{t:.0%} ({_share(row[prunable_within(t)])}), copying keeps {row[copying_at(t)] / base:.0%} of its "
            f"accuracy{band}.{interval} A copying probe costs one forward pass."
        )
    return lines


def findings(profile: str) -> str:
    return "\n\n".join(induction_lines(profile) + copying_lines(profile))
