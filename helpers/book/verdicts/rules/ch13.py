"""Chapter 13's claims, beyond the paper: removing KV groups shrinks the cache at a small
perplexity cost; pruning that keeps perplexity can break in-context copying; importance on
ordinary text can call the induction heads unimportant; removing KV groups speeds generation up
in a serving runtime (llama.cpp). The rules read ``13_memory``, ``13_copying_summary``,
``13_induction`` and ``13_runtime_speed``."""

from __future__ import annotations

import math

import pandas as pd

from ...experiments.buys_and_breaks import BAND_ORDER, COPYING_FLOOR, KEPT_LEVEL
from ...store.columns import (
    COPYING_KEPT,
    INDUCTION_TOP,
    MIN_BAND_ORDERS,
    UNPRUNED_COPYING,
    VERDICT_SEQUENCES,
    copying_at,
    copying_kept_interval,
    prunable_within,
    random_copying_at,
    random_orders_at,
)
from .. import samples
from ..engine import CANNOT_TELL, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, Results, present, three_way

CHAPTER = "13_buys_and_breaks"
PERPLEXITY_COST = 0.10  # "at a small perplexity cost": at most 10% above the unpruned model's
COPYING_DENTED = 0.90  # copying "breaks" below COPYING_FLOOR of its accuracy, and is dented below this
COPYING_PERPLEXITY = (
    0.10  # "pruning that keeps perplexity": within 10% of the unpruned (chapter 11's looser tolerance)
)
INDUCTION_ALPHA = 0.01  # the permutation test's level
PROPORTION_SHARE = 0.5  # "in proportion": at least half the speedup a cache-proportional time would give
GENERATED = "generated tokens per second"  # the speed the serving claim reads (served.speed_summary's column)


def kv_groups_buy_memory(r: Results) -> tuple[str, str]:
    """Read on the cache that generation left (``KV bytes, measured``), per batch size, against the
    unpruned model's at the same batch: the bytes must equal the pruned layers' prediction and
    shrink by the share of groups removed (less 5 points); then perplexity decides between
    reproduced and partly. A cache that does not shrink, or not as predicted, is not reproduced."""
    table = r["13_memory"]
    f32 = table[table["dtype"] == "float32"]
    base = present(f32[f32["unit"] == "unpruned"], "13_memory: unpruned").set_index("batch")
    groups = present(f32[f32["unit"] == "KV groups"], "13_memory: KV groups")
    share = groups["share"].min()
    rows = groups[groups["share"] == share].set_index("batch")
    measured = rows["KV bytes, measured"]
    saved = 1 - measured / base.loc[rows.index, "KV bytes, measured"]
    as_predicted = bool((measured == rows["KV bytes, predicted"]).all())
    cost = rows["perplexity"].iloc[0] / base["perplexity"].iloc[0] - 1
    text = (
        f"{share:.0%} of the KV groups: {saved.min():.0%} of the measured cache saved"
        f"{'' if saved.nunique() == 1 else f' (at least; {len(saved)} batch sizes)'}, "
        f"{'as predicted' if as_predicted else 'not the predicted bytes'}; perplexity {cost:+.0%}"
    )
    follows = as_predicted and bool((saved >= share - 0.05).all())
    return text, REPRODUCED if follows and cost <= PERPLEXITY_COST else PARTLY if follows else NOT_REPRODUCED


def copying_breaks(r: Results) -> tuple[str, str]:
    """Pruning by I_h on verses to the share that keeps perplexity: copying must break, its
    accuracy kept under ``COPYING_FLOOR`` with the whole interval over the verdict probe's
    sequences below it, and lose more than random orders of the same share do (below the random
    band's 5th percentile, on the curves' probe) for "reproduced"; a dent (the interval below
    ``COPYING_DENTED``), or a break that random pruning matches, is "partly"; the interval wholly
    above ``COPYING_DENTED`` is "not reproduced". Where it straddles ``COPYING_DENTED``, or no
    interval or band was drawn, "cannot tell"."""
    summary = r["13_copying_summary"].set_index("order")
    row = present(summary.loc[summary.index == BAND_ORDER], f"13_copying_summary: {BAND_ORDER}").iloc[0]
    t = COPYING_PERPLEXITY
    share, base = row[prunable_within(t)], row[UNPRUNED_COPYING]
    if not base > 0:
        return "(the unpruned model does not copy)", NOT_REPRODUCED
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
        f"{kept:.0%} [{lo:.0%}, {hi:.0%}] over {int(row[VERDICT_SEQUENCES])} sequences"
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
    if hi < COPYING_DENTED:
        return text, PARTLY
    return text, CANNOT_TELL if lo < COPYING_DENTED else NOT_REPRODUCED


RANK_COLUMNS = {"I_h on verses": "rank by I_h on verses", "their one-head effect": "rank by one-head effect on verses"}


def induction_heads_underrated(r: Results) -> tuple[str, str]:
    """Do the strongest induction heads rank further down by importance than heads drawn at
    random? A permutation test on their mean rank (``significance.mean_rank_p``): one of five
    heads in the less important half happens by chance 97% of the time, so a count is no test."""
    from ....heads.significance import mean_rank_p

    ranks = r["13_induction"]
    top = ranks.nsmallest(INDUCTION_TOP, "induction rank")
    by = {label: column for label, column in RANK_COLUMNS.items() if column in top}
    p = {label: mean_rank_p(top[column].astype(int), len(ranks)) for label, column in by.items()}
    text = "; ".join(
        f"by {label}: ranks {', '.join(str(int(x)) for x in sorted(top[by[label]]))} of {len(ranks)}, "
        f"permutation p = {p[label]:.4f}"
        for label in p
    )
    return (
        f"the {INDUCTION_TOP} strongest induction heads {text}",
        three_way(p["I_h on verses"] < INDUCTION_ALPHA, p.get("their one-head effect", 1.0) < INDUCTION_ALPHA),
    )


def served_gains(summary: pd.DataFrame, unit: str) -> pd.DataFrame:
    """Per share of ``unit`` and thread count, from ``served.speed_summary``: llama.cpp's median
    generation speed against the unpruned file's (``gain``, as a fraction), the larger timing
    spread of the two (IQR / median over the repeats), and the gain a time proportional to the
    cache left would give, 1 / (1 - share) - 1."""
    base = present(summary[summary["unit"] == "unpruned"], "13_runtime_speed: unpruned").set_index("threads")
    rows = summary[summary["unit"] == unit].copy()
    rows["gain"] = rows[f"{GENERATED}, ratio"] - 1
    rows["noise"] = [
        max(spread, base.loc[t, f"{GENERATED}, spread"])
        for spread, t in zip(rows[f"{GENERATED}, spread"], rows["threads"])
    ]
    rows["proportional"] = 1 / (1 - rows["share"]) - 1
    return rows[["share", "threads", "gain", "noise", "proportional"]]


def serving_threads(summary: pd.DataFrame) -> int:
    """The thread count a server of the unpruned file would be run with: the one at which it
    generates fastest (more threads than free cores slow generation down)."""
    return int(summary[summary["unit"] == "unpruned"].set_index("threads")[GENERATED].idxmax())


def served_speedup(r: Results) -> tuple[str, str]:
    """At the thread count a server would use (``serving_threads``; the others are shown, not
    judged), every share of KV groups removed must generate faster than the unpruned file beyond
    the timing noise; "reproduced" when each gain is also at least
    ``PROPORTION_SHARE`` of the cache-proportional gain, "partly" when it is not. Where a gain is
    not beyond the noise: "not reproduced" if some share is slower beyond the noise, else "cannot
    tell". The same share of query heads removed (which keeps more of the cache) is shown beside
    each gain: what removing heads buys without shrinking the cache as much."""
    from ...experiments.served import speed_summary

    summary = speed_summary(r["13_runtime_speed"])
    present(summary[summary["unit"] == "KV groups"], "13_runtime_speed: KV groups")
    every = served_gains(summary, "KV groups")
    control = served_gains(summary, "query heads").set_index(["share", "threads"])["gain"]
    judged = serving_threads(summary)
    text = "; ".join(
        f"{share:.0%} of the KV groups, {int(t)} thread{'s' if t > 1 else ''}"
        f"{' (judged)' if t == judged else ''}: generation {gain:+.0%} "
        f"(noise {noise:.0%}; in proportion to the cache {prop:+.0%}; the same share of query heads "
        f"{control.get((share, t), float('nan')):+.0%})"
        for share, t, gain, noise, prop in every.itertuples(index=False)
    )
    gains = every[every["threads"] == judged]
    faster = bool((gains["gain"] > gains["noise"]).all())
    if not faster:  # slower beyond the noise somewhere refutes the claim; a change within it is undetermined
        return text, NOT_REPRODUCED if bool((gains["gain"] < -gains["noise"]).any()) else CANNOT_TELL
    return text, three_way(bool((gains["gain"] >= PROPORTION_SHARE * gains["proportional"]).all()), True)


def served_sample(r: Results) -> str:
    speed = r["13_runtime_speed"]
    runs = speed.groupby(["unit", "share", "threads"]).size().min()
    return (
        f"{runs} timed llama.cpp runs per file and thread count (after a warm-up), median; "
        f"float16 files, llama.cpp's default settings"
    )


def memory_sample(r: Results) -> str:
    table = r["13_memory"]
    batches = ", ".join(str(int(b)) for b in sorted(table["batch"].unique()))
    verses = f"perplexity on {int(table['perplexity verses'].iloc[0])} verses" if "perplexity verses" in table else ""
    return f"the cache counted to the byte at batch {batches}" + (f"; {verses}" if verses else "")


def copying_sample(r: Results) -> str:
    row = r["13_copying_summary"].set_index("order").loc[BAND_ORDER]
    orders = row.get(random_orders_at(COPYING_PERPLEXITY), 0)
    curves = r["13_copying_curves"]
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
            f"{row[prunable_within(COPYING_PERPLEXITY)]:.0%} pruned",
            verdict,
        )
        if part
    )


def induction_sample(r: Results) -> str:
    return samples.mean_rank(INDUCTION_TOP, len(r["13_induction"]), INDUCTION_ALPHA)


CLAIMS = [
    Claim(
        "kv_groups_buy_memory",
        "Beyond the paper, KV cache",
        "Removing KV groups by importance shrinks the KV cache in proportion, at a small perplexity cost",
        "1.67x less memory for GQA models (DuoAttention), heads chosen for it",
        f"reproduced: at the smallest share of KV groups removed, the cache generation leaves (measured, "
        f"at every batch size) holds the predicted bytes and shrinks by at least that share (less 5 points), "
        f"with perplexity at most {PERPLEXITY_COST:.0%} higher; partly: the cache shrinks so, perplexity rises "
        "more; not reproduced: it shrinks less, or not as predicted",
        CHAPTER,
        kv_groups_buy_memory,
        measured_on="KV bytes and perplexity on verses",
        sample=memory_sample,
    ),
    Claim(
        "copying_breaks",
        "Beyond the paper, retrieval heads",
        "Pruning that keeps perplexity can break in-context copying",
        "removing the retrieval heads (under 5%) breaks retrieval; random heads do not",
        f"reproduced: at the share pruned by I_h on verses with perplexity within {COPYING_PERPLEXITY:.0%}, copying "
        "keeps under "
        f"{COPYING_FLOOR:.0%} of its accuracy (the whole {KEPT_LEVEL:.0%} interval over a probe's sequences) and "
        "less than "
        f"the 5th percentile of random orders pruning the same share; partly: under {COPYING_DENTED:.0%}, or broken "
        f"as much by random orders; cannot tell: the interval straddles {COPYING_DENTED:.0%}",
        CHAPTER,
        copying_breaks,
        measured_on="copying accuracy and perplexity on verses",
        sample=copying_sample,
    ),
    Claim(
        "induction_heads_underrated",
        "Beyond the paper, induction heads",
        "Importance on ordinary text can call the heads that copy unimportant",
        "induction heads carry in-context copying",
        f"reproduced: the {INDUCTION_TOP} strongest induction heads rank further down by I_h on verses than "
        f"{INDUCTION_TOP} heads drawn at random (permutation test on their mean rank, p < {INDUCTION_ALPHA}); partly: "
        "only by their one-head effect",
        CHAPTER,
        induction_heads_underrated,
        measured_on="induction scores and importance on verses",
        sample=induction_sample,
    ),
    Claim(
        "served_speedup",
        "Beyond the paper, serving",
        "Removing KV groups speeds generation up in a serving runtime, in proportion to the cache it removes",
        "uneven per-layer heads do not load in serving runtimes "
        "(pruning tools' issue trackers); §4.3 measures speed in the training framework only",
        f"reproduced: at every share of KV groups removed, at the thread count where the unpruned file generates "
        "fastest (the others shown), llama.cpp generates faster than the unpruned file beyond the timing noise (the "
        "larger IQR / median of the two), by at least "
        f"{PROPORTION_SHARE:.0%} of the gain a time proportional to the cache left would give (1 / (1 - share) - 1); "
        "partly: faster beyond the noise, by less; not reproduced: slower beyond the noise somewhere; cannot tell: "
        "a change within the noise",
        CHAPTER,
        served_speedup,
        measured_on="generation speed in llama.cpp",
        sample=served_sample,
    ),
]
