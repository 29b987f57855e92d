"""Chapter 13b, what removing heads breaks: the rules that judge its claims and its findings in words.

Chapter 13b's claims, beyond the paper: pruning that keeps perplexity can break in-context
copying, and importance on ordinary text can call the induction heads unimportant. The rules
read ``13b_copying_summary``, ``13b_copying_curves`` and ``13b_induction``.

``findings``: chapter 13b's "What this run shows" paragraph: what removing heads breaks.
"""

from __future__ import annotations

import math

import pandas as pd

from ..experiments.buys_and_breaks import BAND_ORDER, COPYING_FLOOR, KEPT_LEVEL
from ..store.columns import (
    COPYING_KEPT,
    COPYING_TOLERANCES,
    INDUCTION_TOP,
    MIN_BAND_ORDERS,
    UNPRUNED_COPYING,
    VERDICT_SEQUENCES,
    copying_at,
    copying_below,
    copying_kept_interval,
    prunable_within,
    random_copying_at,
    random_orders_at,
    shown,
)
from ..store.results import ChapterTables
from ..verdicts import samples
from ..verdicts.engine import (
    CANNOT_TELL,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    Claim,
    Results,
    present,
    three_way,
)
from ..verdicts.text import percent, share_interval, words

CHAPTER = "13b_what_removing_heads_breaks"
_COPYING_DENTED = 0.90  # copying "breaks" below COPYING_FLOOR of its accuracy, and is dented below this
_COPYING_PERPLEXITY = (
    0.10  # "pruning that keeps perplexity": within 10% of the unpruned (chapter 11's looser tolerance)
)
_INDUCTION_ALPHA = 0.01  # the permutation test's level


def copying_breaks(r: Results) -> tuple[str, str]:
    """Pruning by I_h on verses to the share that keeps perplexity: copying must break, its
    accuracy kept under ``COPYING_FLOOR`` with the whole interval over the verdict probe's
    sequences below it, and lose more than random orders of the same share do (below the random
    band's 5th percentile, on the curves' probe) for "reproduced"; a dent (the interval below
    ``_COPYING_DENTED``), or a break that random pruning matches, is "partly"; the interval wholly
    above ``_COPYING_DENTED`` is "not reproduced". Where it straddles ``_COPYING_DENTED``, or no
    interval or band was drawn, "cannot tell"."""
    summary = r["13b_copying_summary"].set_index("order")
    row = present(summary.loc[summary.index == BAND_ORDER], f"13b_copying_summary: {BAND_ORDER}").iloc[0]
    t = _COPYING_PERPLEXITY
    share, base = row[prunable_within(t)], row[UNPRUNED_COPYING]
    if not base > 0:  # nothing to break is no evidence either way, not a refutation
        return "(the unpruned model does not copy: there is nothing for pruning to break)", CANNOT_TELL
    ours = row[copying_at(t)]
    low, high = (row.get(random_copying_at(t, q), math.nan) for q in ("5%", "95%"))
    orders = row.get(random_orders_at(t), 0)
    banded = not pd.isna(low) and orders >= MIN_BAND_ORDERS
    band = (
        f"; {int(orders)} random orders of that share keep {low / base:.0%} to {high / base:.0%} (5-95%)"
        if not pd.isna(low)
        else "; no random band drawn"
    )
    kept = row.get(COPYING_KEPT.format(t), math.nan)
    lo, hi = (row.get(copying_kept_interval(t, end), math.nan) for end in ("low", "high"))
    interval = (
        f"{share_interval(kept, lo, hi)} over {int(row[VERDICT_SEQUENCES])} sequences"
        if not pd.isna(kept)
        else "no interval over sequences"
    )
    text = (
        f"{share:.0%} pruned by I_h on verses (perplexity within {t:.0%}): copying keeps {ours / base:.0%} of its "
        f"accuracy{band}; kept on the verdict probe: {interval}"
    )
    if pd.isna(ours) or pd.isna(kept):
        return text, CANNOT_TELL
    if hi < COPYING_FLOOR:  # broken beyond doubt: is it more than random pruning of that share does?
        if not banded:
            return text + " (too few random orders to tell it from random pruning)", CANNOT_TELL
        return text, REPRODUCED if ours < low else PARTLY
    if hi < _COPYING_DENTED:
        return text, PARTLY
    return text, CANNOT_TELL if lo < _COPYING_DENTED else NOT_REPRODUCED


_RANK_COLUMNS = {
    "I_h on verses": "rank by I_h on verses",
    "their one-head effect": "rank by one-head effect on verses",
}


def induction_heads_underrated(r: Results) -> tuple[str, str]:
    """Do the strongest induction heads rank further down by importance than heads drawn at
    random? A permutation test on their mean rank (``significance.mean_rank_p``): one of five
    heads in the less important half happens by chance 97% of the time, so a count is no test."""
    from ...heads.significance import mean_rank_p

    ranks = r["13b_induction"]
    top = ranks.nsmallest(INDUCTION_TOP, "induction rank")
    by = {label: column for label, column in _RANK_COLUMNS.items() if column in top}
    p = {label: mean_rank_p(top[column].astype(int), len(ranks)) for label, column in by.items()}
    text = "; ".join(
        f"by {label}: ranks {', '.join(str(int(x)) for x in sorted(top[by[label]]))} of {len(ranks)}, "
        f"permutation p = {p[label]:.4f}"
        for label in p
    )
    return (
        f"the {INDUCTION_TOP} strongest induction heads {text}",
        three_way(p["I_h on verses"] < _INDUCTION_ALPHA, p.get("their one-head effect", 1.0) < _INDUCTION_ALPHA),
    )


def _copying_sample(r: Results) -> str:
    row = r["13b_copying_summary"].set_index("order").loc[BAND_ORDER]
    orders = row.get(random_orders_at(_COPYING_PERPLEXITY), 0)
    curves = r["13b_copying_curves"]
    sequences = (
        f"{int(curves['copying sequences'].iloc[0])} copying sequences" if "copying sequences" in curves else ""
    )
    verdict = (
        f"the kept share's interval over {int(row[VERDICT_SEQUENCES])} sequences of a probe of its own"
        if not pd.isna(row.get(VERDICT_SEQUENCES, math.nan))
        else ""
    )
    return "; ".join(
        part
        for part in (
            sequences,
            f"{int(orders) if not pd.isna(orders) else 0} random orders at "
            f"{row[prunable_within(_COPYING_PERPLEXITY)]:.0%} pruned",
            verdict,
        )
        if part
    )


def _induction_sample(r: Results) -> str:
    return samples.mean_rank(INDUCTION_TOP, len(r["13b_induction"]), _INDUCTION_ALPHA)


CLAIMS = [
    Claim(
        "copying_breaks",
        "Beyond the paper, retrieval heads",
        "Pruning that keeps perplexity can break in-context copying",
        "removing the retrieval heads (under 5%) breaks retrieval; random heads do not",
        f"reproduced: at the share pruned by I_h on verses with perplexity within {_COPYING_PERPLEXITY:.0%}, copying "
        "keeps under "
        f"{COPYING_FLOOR:.0%} of its accuracy (the whole interval over a probe's sequences, calibrated to cover "
        f"{KEPT_LEVEL:.0%}) and "
        "less than "
        f"the 5th percentile of random orders pruning the same share; partly: under {_COPYING_DENTED:.0%}, or broken "
        f"as much by random orders; not reproduced: the whole interval at or above {_COPYING_DENTED:.0%}; cannot "
        f"tell: the interval straddles {_COPYING_DENTED:.0%}, the unpruned model does not copy, no interval was "
        f"drawn, or fewer than {MIN_BAND_ORDERS} random orders stand beside a broken copying",
        CHAPTER,
        copying_breaks,
        measured_on="copying accuracy and perplexity on verses",
        sample=_copying_sample,
    ),
    Claim(
        "induction_heads_underrated",
        "Beyond the paper, induction heads",
        "Importance on ordinary text can call the heads that copy unimportant",
        "induction heads carry in-context copying",
        f"reproduced: the {INDUCTION_TOP} strongest induction heads rank further down by I_h on verses than "
        f"{INDUCTION_TOP} heads drawn at random (permutation test on their mean rank, p < {_INDUCTION_ALPHA}); "
        "partly: only by their one-head effect",
        CHAPTER,
        induction_heads_underrated,
        measured_on="induction scores and importance on verses",
        sample=_induction_sample,
    ),
]


def _induction_lines(tables: ChapterTables) -> list[str]:
    """Where the strongest induction heads rank by each importance."""
    ranks = tables["13b_induction"]
    top = ranks.nsmallest(INDUCTION_TOP, "induction rank")
    heads = len(ranks)
    by = [c for c in ranks.columns if c.startswith("rank by ")]
    named = words([f"{shown(r['layer'])}.{shown(r['head'])} ({r['induction score']:.2f})" for _, r in top.iterrows()])
    where = words([f"{c[len('rank by ') :]}: {', '.join(str(int(v)) for v in top[c])} of {heads}" for c in by])
    return [
        f"**Induction heads:** the {INDUCTION_TOP} strongest (layer.head, score) are {named}. Their ranks (1 = most "
        f"important) by {where}."
    ]


def copying_lines(tables: ChapterTables) -> list[str]:
    """Per order: what each perplexity tolerance allows pruned, and copying there."""
    summary = tables["13b_copying_summary"].set_index("order")
    below = copying_below(COPYING_FLOOR)
    lines = []
    for order, row in summary.iterrows():
        fall = (
            "never falls below half of it"
            if pd.isna(row[below])
            else f"falls below half of it from {percent(row[below])} pruned"
        )
        allowed = " ".join(
            f"Within {t:.0%} of the verse perplexity, {percent(row[prunable_within(t)])} of the query heads can go, "
            f"and copying accuracy there is {row[copying_at(t)]:.2f}."
            for t in COPYING_TOLERANCES
        )
        lines.append(
            f"**{order}.** {allowed} Unpruned, copying accuracy is {row[UNPRUNED_COPYING]:.2f}, and it {fall}."
        )
    if BAND_ORDER in summary.index and summary.loc[BAND_ORDER, UNPRUNED_COPYING] > 0:
        row, t = summary.loc[BAND_ORDER], _COPYING_PERPLEXITY  # the tolerance the copying rule reads
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
            f"{t:.0%} ({percent(row[prunable_within(t)])}), copying keeps {row[copying_at(t)] / base:.0%} of its "
            f"accuracy{band}.{interval} A copying probe costs one forward pass."
        )
    return lines


def findings(tables: ChapterTables) -> str:
    return "\n\n".join(_induction_lines(tables) + copying_lines(tables))
