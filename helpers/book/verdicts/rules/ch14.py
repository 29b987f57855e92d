"""Chapter 14's claims, from work after the paper: at equal KV-cache bytes, quantizing the cache
costs less perplexity than evicting tokens ("More Tokens, Lower Precision", Zhang et al. 2024,
the comparison that paper makes) and than removing KV groups (ours); keeping full context in the groups that need it
beats removing groups (DuoAttention's premise); groups removed by importance beat groups removed
at random. The rules read ``14_points`` and ``14_pairs``."""

from __future__ import annotations

import pandas as pd

from ...experiments.memory_budget import EVICTED, QUANTIZED, RANDOM, REMOVED, WINDOWED
from ...store.columns import MIN_BAND_ORDERS
from ..engine import CANNOT_TELL, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, Results, present

CHAPTER = "14_memory_budget"
CLAIMED_BUDGETS = (0.5, 0.25)  # "at half and at a quarter of the bytes"
BAND_BUDGET = 0.5


SHARE_GAP = 0.02  # two methods are "at equal bytes" when their shares of the cache differ by at most 2 points


def versus(pairs: pd.DataFrame, budget: float, method: str, other: str) -> str | None:
    """At ``budget``: ``method`` if its perplexity is lower than ``other``'s beyond the interval
    (the log-perplexity gap's lower end above 0), ``other`` if the reverse, ``"neither"`` when the
    interval holds 0 or their shares of the bytes differ by more than ``SHARE_GAP`` (not equal
    bytes), None when one of them has no configuration within the budget."""
    at = pairs[(pairs["budget"] - budget).abs() < 1e-9]
    row = at[((at["better"] == method) & (at["worse"] == other)) | ((at["better"] == other) & (at["worse"] == method))]
    if row.empty:
        return None
    row = row.iloc[0]
    if abs(row["better share"] - row["worse share"]) > SHARE_GAP:
        return "neither"
    return row["better"] if row["gap low"] > 0 else "neither"


def _beats(r: Results, method: str, other: str) -> tuple[str, str]:
    """``method`` against ``other`` at each of ``CLAIMED_BUDGETS`` (``versus``): reproduced when it
    is better at every budget; partly when each is better at one; not reproduced when ``other`` is
    better somewhere and ``method`` nowhere (the claim is made for every budget, so one clear loss
    refutes it even where another budget cannot tell); cannot tell otherwise (a gap inside its
    interval, unequal bytes, or a method with nothing within a budget, and no loss)."""
    pairs = present(r["14_pairs"], "14_pairs")
    parts, outcomes = [], []
    for budget in CLAIMED_BUDGETS:
        outcome = versus(pairs, budget, method, other)
        outcomes.append(outcome)
        at = pairs[((pairs["budget"] - budget).abs() < 1e-9)]
        row = at[at["better"].isin([method, other]) & at["worse"].isin([method, other])]
        if row.empty:
            parts.append(f"at {budget:.0%} of the bytes: not both within it")
            continue
        row = row.iloc[0]
        sign = 1 if row["better"] == method else -1
        gap, low, high = (sign * row[c] for c in ("log-perplexity gap", "gap low", "gap high"))
        low, high = sorted((low, high))
        mine, theirs = (row["better share"], row["worse share"])[::sign]
        more = "more" if gap >= 0 else "less"
        if gap < 0:  # said as a saving, its interval with it
            gap, low, high = -gap, -high, -low
        parts.append(
            f"at {budget:.0%} of the bytes ({method} {mine:.1%}, {other} {theirs:.1%}), {other} costs "
            f"{gap:.3f} nats per token {more} than {method} [{low:+.3f}, {high:+.3f}]"
        )
    wins, losses = outcomes.count(method), outcomes.count(other)
    verdict = (
        REPRODUCED
        if wins == len(outcomes)
        else PARTLY
        if wins and losses
        else NOT_REPRODUCED
        if losses and not wins
        else CANNOT_TELL
    )
    return "; ".join(parts), verdict


def quantizing_beats_removal(r: Results) -> tuple[str, str]:
    return _beats(r, QUANTIZED, REMOVED)


def quantizing_beats_eviction(r: Results) -> tuple[str, str]:
    """The comparison Zhang et al. (2024) make: more tokens at lower precision (the quantized
    cache) against fewer tokens at 16 bits (heavy hitters evicted), at equal bytes."""
    return _beats(r, QUANTIZED, EVICTED)


def windows_beat_removal(r: Results) -> tuple[str, str]:
    return _beats(r, WINDOWED, REMOVED)


def importance_beats_random_groups(r: Results) -> tuple[str, str]:
    """KV groups removed by importance at ``BAND_BUDGET``, against as many removed in random
    orders: reproduced when its perplexity is below every random order's (with 20 orders, chance
    gives that 1 time in 21), not reproduced otherwise; cannot tell with fewer than
    ``MIN_BAND_ORDERS`` orders, or when the orders' bytes are not importance's (within 1 point)."""
    points = present(r["14_points"], "14_points")
    band = points[points["method"] == RANDOM]
    ours = points[(points["method"] == REMOVED) & ((points["budget"] - BAND_BUDGET).abs() < 1e-9)]
    if ours.empty or band.empty:
        return "(no removal at that budget, or no random orders)", CANNOT_TELL
    ppl, share = float(ours["perplexity ratio"].iloc[0]), float(ours["bytes share"].iloc[0])
    below = int((band["perplexity ratio"] <= ppl).sum())
    text = (
        f"{share:.1%} of the bytes kept by removing KV groups by importance: perplexity x{ppl:.2f}; {len(band)} "
        "random "
        f"orders: x{band['perplexity ratio'].min():.2f} (best) to x{band['perplexity ratio'].max():.2f}, median "
        f"x{band['perplexity ratio'].median():.2f}; {below} as good or better (rank p = "
        f"{(1 + below) / (1 + len(band)):.3f})"
    )
    if len(band) < MIN_BAND_ORDERS:
        return text + f" (fewer than {MIN_BAND_ORDERS} orders: no band)", CANNOT_TELL
    if (band["bytes share"] - share).abs().max() > 0.01:
        return text + " (the random orders keep other bytes: not like with like)", CANNOT_TELL
    return text, REPRODUCED if below == 0 else NOT_REPRODUCED


def sample(r: Results) -> str:
    points = r["14_points"]
    band = int((points["method"] == RANDOM).sum())
    row = points.iloc[0]
    return (
        f"n = {int(row['sequences'])} whole chapters ({int(row['scored tokens']):,} scored tokens), paired bootstrap "
        f"over chapters; {band} random orders"
    )


CLAIMS = [
    Claim(
        "quantizing_beats_removal",
        "Beyond the paper, KV memory",
        "At half and at a quarter of the KV-cache "
        "bytes, quantizing the cache costs less perplexity than removing KV groups",
        "quantization against fewer KV heads: Zhang et al. (2024) compare it with evicted tokens (the next claim), "
        "not with removed heads; this claim is ours",
        f"reproduced: at {' and '.join(f'{b:.0%}' for b in CLAIMED_BUDGETS)} of the bytes the quantized cache (the "
        "most bytes within the budget) has lower perplexity than removing KV groups by importance, the paired "
        "interval over chapters clear of 0 and the two within 2 points of each other's bytes; partly: at one, the "
        "reverse at the other; not reproduced: removal wins at one and quantization at neither; cannot tell: "
        "otherwise (an interval holding 0, unequal bytes, a method with nothing within a budget)",
        CHAPTER,
        quantizing_beats_removal,
        measured_on="perplexity on whole chapters, at equal bytes",
        sample=sample,
    ),
    Claim(
        "quantizing_beats_eviction",
        "Beyond the paper, KV memory",
        "At half and at a quarter of the KV-cache bytes, quantizing the cache costs less perplexity than evicting "
        "tokens",
        "at equal memory, more tokens at lower precision beat fewer tokens at 16 bits (Zhang et al. 2024, 7-8B "
        "models: their comparison)",
        "as the claim above, the quantized cache against heavy hitters evicted (the most bytes of each within the "
        "budget)",
        CHAPTER,
        quantizing_beats_eviction,
        measured_on="perplexity on whole chapters, at equal bytes",
        sample=sample,
    ),
    Claim(
        "windows_beat_removal",
        "Beyond the paper, KV memory",
        "Keeping full context in the KV groups that need "
        "it (and a window in the rest) beats removing KV groups at equal bytes",
        "streaming heads cut the cache 1.67-2.55x at little loss (DuoAttention, Xiao et al. 2024)",
        "as the claim above, windowed heads against KV groups removed",
        CHAPTER,
        windows_beat_removal,
        measured_on="perplexity on whole chapters, at equal bytes",
        sample=sample,
    ),
    Claim(
        "importance_beats_random_groups",
        "Beyond the paper, KV memory",
        "At half the KV-cache bytes, KV groups removed by importance cost less than groups removed at random "
        "(the one budget the random band is drawn at)",
        "importance keeps the score far longer than random (§4.2)",
        f"reproduced: at {BAND_BUDGET:.0%} of the bytes, perplexity below that of every random order removing as "
        f"many groups (a rank test: 1 in 21 by chance with 20 orders); cannot tell: fewer than {MIN_BAND_ORDERS} "
        "orders, or orders keeping other bytes",
        CHAPTER,
        importance_beats_random_groups,
        measured_on="perplexity on whole chapters",
        sample=sample,
    ),
]
