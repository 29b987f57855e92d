"""Paired bootstrap resampling (Koehn, 2004), the paper's significance test (1,000 resamples,
p < 0.01; the authors ran it with compare-mt, paper §3.2).

A score is computed from per-example statistics summed over a set of examples: correctness for
accuracy (one column), sacrebleu's n-gram counts for BLEU (ten columns), the negative
log-likelihood and its number of tokens for a likelihood (two columns). Each resample draws N
example indices with replacement, the same indices for both systems (paired), and scores both.

``p_value`` is the share of resamples in which the difference does not have the sign it has on
the full set (ties count against it), as compare-mt reports "system X is better in (1 - p) of
resamples". With no difference on the full set, p is 1. This p is one-sided in whichever
direction the full set points, so ``p < alpha`` is a one-sided test at ``alpha`` in each
direction: a system with no difference is flagged with probability about 2·alpha
(``chance_flag_rate``), alpha in each direction. We keep the paper's test and count chance at
that rate.

A difference within the arithmetic's resolution (``resolution``) is no difference: its delta is
0, p is 1, and it is neither significant nor a gain. A likelihood is summed from float32
numbers, and two computations of the same thing by another path (another batching, the gated
path instead of a fused kernel) differ in their last bits; where those bits lean one way on
every unit, the paired test sees a change of one sign everywhere and calls it significant.

``low`` and ``high`` bound the difference: the ``alpha`` and ``1 - alpha`` quantiles of the
resampled differences (a percentile interval at confidence ``1 - 2 alpha``, the interval of two
one-sided tests at level ``alpha``). ``equivalence_class`` places it against a margin: a change
is *harmful* or *helpful* when the whole interval lies beyond the margin, *negligible* when it
lies inside, and *undetermined* otherwise (Schuirmann 1987; Lakens 2017).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .metrics import Scorer, accuracy_from_stats, log_likelihood

MIN_UNITS = 30
"""The smallest sample (examples, sentences, verses) a bootstrap in the book runs on: over fewer,
resampling cannot stand for drawing new examples (over 4 verses it flags about a fifth of the heads
with no effect), so a chapter reports such a test as not measured, with its n, instead of running it."""


FLOAT32_EPS = float(np.finfo(np.float32).eps)  # 2**-23: the gap between 1 and the next float32
ROUNDING_EPS = 4
"""How far rounding can move a float32 score, in float32 epsilons of its size. A unit's
likelihood computed twice by paths equal in exact arithmetic (the course translation model, its
400 test13 verses in two batchings) differs by up to 2.4 epsilons of its size; were every unit
to move so in one direction, the mean would move by as much. The sweeps' own two paths (fairseq's
fused kernel for the unmasked model, the explicit gated path for a masked one) moved the mean
likelihood by at most 0.91 epsilons of its size when the masked head was one the coupled decay
had zeroed (course builds to 3 December 2026), and the tiny models' per-unit gap between them is
tested to stay below this bound. 4 leaves room above both, and lies below the smallest living
one-head effect chapter 03 measured (7.2 epsilons) and far below any effect the book weighs (4
epsilons of 2.6 nats is 1.2e-6 nats; its margins are thousandths)."""


def resolution(stats: np.ndarray, score: Scorer, eps: float = FLOAT32_EPS) -> float:
    """The smallest change of ``score`` that rounding cannot produce, computed from one system's
    per-unit statistics ``stats`` [N, k]: ``ROUNDING_EPS * eps`` times the score of the units'
    magnitudes (``score`` of ``|stats|`` summed: for a likelihood, the mean negative
    log-likelihood). 0 when the statistics are whole numbers (counts: correct predictions, BLEU's
    n-grams), which are exact. ``eps``: the arithmetic's (float32 by default; a score computed in
    bfloat16 passes its own)."""
    stats = np.asarray(stats, dtype=np.float64)
    if np.array_equal(stats, np.round(stats)):
        return 0.0
    return ROUNDING_EPS * eps * abs(score(np.abs(stats if stats.ndim == 2 else stats[:, None]).sum(0)))


class SampleTooSmall(ValueError):
    """A bootstrap was asked for on fewer units than its declared minimum."""


def require_units(n: int, min_units: int = MIN_UNITS, unit: str = "examples") -> None:
    """Raise ``SampleTooSmall`` when a bootstrap over ``n`` ``unit`` falls below ``min_units``."""
    if n < min_units:
        raise SampleTooSmall(
            f"a paired bootstrap over {n} {unit} is below the declared minimum of {min_units} "
            f"(significance.MIN_UNITS): score more {unit}, or report the test as not measured with "
            f"its n; a check of code paths only may lower min_units"
        )


@dataclass(frozen=True)
class Bootstrap:
    """The paired bootstrap's settings, one value wherever a test is run: ``n_resamples``
    resamples of the examples, drawn with ``seed``; a change is significant at p < ``alpha`` and
    its interval spans the ``alpha`` to ``1 - alpha`` quantiles; a test over fewer than
    ``min_units`` examples is refused (``SampleTooSmall``)."""

    n_resamples: int = 1000
    alpha: float = 0.01
    seed: int = 0
    min_units: int = MIN_UNITS

    def at(self, alpha: float) -> Bootstrap:
        """The same settings at another level (a look of a sequential test)."""
        return replace(self, alpha=alpha)


@dataclass(frozen=True)
class _PairedResult:
    delta: float  # score(b) - score(a) on the full set
    p_value: float
    significant: bool
    low: float = 0.0  # the alpha quantile of the resampled differences
    high: float = 0.0  # ... and the 1 - alpha quantile


EQUIVALENCE_CLASSES = ("harmful", "negligible", "helpful", "undetermined")


def equivalence_class(low: float, high: float, margin: float) -> str:
    """Where the interval [low, high] of a change lies against ``margin`` (> 0, in the score's
    unit; a higher score is better): ``harmful`` below -margin, ``helpful`` above +margin,
    ``negligible`` inside (-margin, +margin), else ``undetermined``."""
    if not margin > 0:
        raise ValueError(f"an equivalence margin is a positive change in the score's unit, not {margin!r}")
    if high < -margin:
        return "harmful"
    if low > margin:
        return "helpful"
    if -margin < low and high < margin:
        return "negligible"
    return "undetermined"


def chance_flag_rate(alpha: float, one_direction: bool = False) -> float:
    """The share of systems with no difference that ``paired_bootstrap`` flags as significant at
    ``alpha``: 2·alpha in all, alpha counting only one direction (only gains, or only losses).
    p is taken in the direction of the full-set difference (the module's docstring), so each
    direction is a one-sided test at ``alpha`` (tests/test_significance.py simulates it)."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha is a test level between 0 and 0.5, got {alpha!r}")
    return alpha if one_direction else 2 * alpha


def mean_rank_p(ranks: Sequence[int], total: int, draws: int = 10_000, seed: int = 0) -> float:
    """One-sided permutation p-value that the items of ``ranks`` (1 = first of ``total``) rank
    further down than items drawn at random: the share of ``draws`` random sets of as many items
    (without replacement) whose mean rank is at least theirs, as ``(1 + hits) / (1 + draws)``
    so that p is never 0."""
    ranks = np.asarray(ranks, dtype=np.float64)
    if not len(ranks) or len(ranks) > total or ranks.min() < 1 or ranks.max() > total:
        raise ValueError(f"ranks must be {len(ranks)} values between 1 and total={total}, got {ranks.tolist()}")
    hits = int((mean_rank_null(len(ranks), total, draws, seed) >= ranks.mean() - 1e-9).sum())
    return (1 + hits) / (1 + draws)


def mean_rank_null(k: int, total: int, draws: int = 10_000, seed: int = 0) -> np.ndarray:
    """[draws] mean ranks of ``k`` items drawn at random without replacement from ranks 1..``total``:
    the null distribution ``mean_rank_p`` compares with."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((draws, total)), axis=1)[:, :k].mean(1) + 1


def resample_indices(n: int, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """[n_resamples, n] example indices drawn with replacement; share them across comparisons."""
    return np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))


def paired_bootstrap(
    stats_a: np.ndarray,
    stats_b: np.ndarray,
    *,
    score: Scorer,
    indices: np.ndarray | None = None,
    alpha: float = 0.01,
    resampled_a: np.ndarray | None = None,
    smallest: float | None = None,
) -> _PairedResult:
    """Is system b's score different from system a's? ``stats_*``: [N, k] per-example statistics.
    ``resampled_a``: system a's summed statistics in each resample of ``indices`` (``resampled_sums``),
    when many systems b are compared with one a (a sweep), so that they are summed once.
    ``smallest``: the arithmetic's resolution (None: ``resolution(stats_a, score)``); a difference
    no larger is 0, with p 1, and its interval is still reported."""
    stats_a, stats_b = np.asarray(stats_a, dtype=np.float64), np.asarray(stats_b, dtype=np.float64)
    if stats_a.shape != stats_b.shape:
        raise ValueError(f"paired systems need statistics of one shape, got {stats_a.shape} and {stats_b.shape}")
    if stats_a.ndim == 1:
        stats_a, stats_b = stats_a[:, None], stats_b[:, None]
    indices = resample_indices(len(stats_a)) if indices is None else indices
    delta = score(stats_b.sum(0)) - score(stats_a.sum(0))
    if delta == 0 and np.array_equal(stats_a, stats_b):
        return _PairedResult(0.0, 1.0, False)  # the same outputs on every example: no difference in any resample
    sums_a = resampled_sums(stats_a, indices) if resampled_a is None else resampled_a
    deltas = score_rows(score, resampled_sums(stats_b, indices)) - score_rows(score, sums_a)
    low, high = np.quantile(deltas, [alpha, 1 - alpha])
    if abs(delta) <= (resolution(stats_a, score) if smallest is None else smallest):
        return _PairedResult(0.0, 1.0, False, float(low), float(high))
    p = float(np.mean(np.sign(deltas) != np.sign(delta)))
    return _PairedResult(float(delta), p, p < alpha, float(low), float(high))


def resampled_sums(stats: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """[R, k]: the statistics ``stats`` [N, k] summed over each resample's examples (``indices`` [R, N]).
    Whole-number statistics (counts: correct predictions, n-gram matches) are summed as a product
    with each resample's draw counts, exact in any order below 2**53; others by gathering the rows."""
    stats = np.asarray(stats, dtype=np.float64)
    stats = stats if stats.ndim == 2 else stats[:, None]
    if np.array_equal(stats, np.round(stats)) and np.abs(stats).max(initial=0) * stats.shape[0] < 2**52:
        return _draw_counts(indices, stats.shape[0]) @ stats
    return stats[indices].sum(1)


def _draw_counts(indices: np.ndarray, n: int) -> np.ndarray:
    """[R, n]: how many times each resample of ``indices`` [R, N] draws each example."""
    rows = len(indices)
    return (
        np.bincount((indices + n * np.arange(rows)[:, None]).ravel(), minlength=rows * n)
        .reshape(rows, n)
        .astype(np.float64)
    )


def score_rows(score: Scorer, sums: np.ndarray) -> np.ndarray:
    """``score`` of each row of ``sums`` [R, k]: by its array form where it has one (``_ARRAY_FORMS``,
    the same arithmetic on every row, so the same floats), else row by row."""
    whole = _ARRAY_FORMS.get(score)
    return whole(sums) if whole is not None else np.array([score(row) for row in sums])


# scores whose arithmetic is one division, written for rows [R, k] of sums: each row gets the
# float its scalar form gives (tests/test_significance.py)
_ARRAY_FORMS: dict[Scorer, Callable[[np.ndarray], np.ndarray]] = {
    log_likelihood: lambda sums: -(sums[:, 0] / sums[:, 1]),
    accuracy_from_stats: lambda sums: sums[:, 0] / sums[:, 1],
}


# ---- does the test hold its level on these data? ---------------------------------------------------
def centred_likelihood(stats_a: np.ndarray, stats_b: np.ndarray) -> np.ndarray:
    """System b's ``[N, 2]`` likelihood statistics (summed NLL, tokens per unit) moved so that its
    log-likelihood per token equals system a's on the whole set, each unit keeping its own
    change's shape: unit i's NLL change d_i becomes d_i - t_i * sum(d) / sum(t). A world where
    b truly changes nothing, with b's per-unit spread and skew (``null_flag_rate``)."""
    a, b = np.asarray(stats_a, dtype=np.float64), np.asarray(stats_b, dtype=np.float64)
    change = b[:, 0] - a[:, 0]
    out = b.copy()
    out[:, 0] = a[:, 0] + change - a[:, 1] * change.sum() / a[:, 1].sum()
    return out


def null_p_values(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]],
    units: int,
    *,
    draws: int = 20,
    n_resamples: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """The p-values ``paired_bootstrap`` gives systems that truly change nothing, on data shaped
    like ``pairs``: per pair of systems (a, b) of ``[N, 2]`` likelihood statistics, b is centred
    on a (``centred_likelihood``), then ``draws`` samples of ``units`` units are drawn with
    replacement from the N (the observed units stand for the population) and tested. ``units``
    may exceed N: how the test would behave on more units like these. One p per test, in order."""
    rng = np.random.default_rng(seed)
    out = []
    for a, b in pairs:
        a = np.asarray(a, dtype=np.float64)
        null_b = centred_likelihood(a, b)
        for _ in range(draws):
            pick = rng.integers(0, len(a), units)
            indices = rng.integers(0, units, size=(n_resamples, units))
            out.append(paired_bootstrap(a[pick], null_b[pick], score=log_likelihood, indices=indices).p_value)
    return np.array(out)


def null_flag_rate(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]],
    units: int,
    *,
    alpha: float,
    draws: int = 20,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, int]:
    """How often ``paired_bootstrap`` at ``alpha`` calls a system significant (either direction)
    that truly changes nothing (``null_p_values``; significant means p < alpha). Returns
    ``(flagged share, tests run)``; the nominal share is ``chance_flag_rate(alpha)``."""
    p = null_p_values(pairs, units, draws=draws, n_resamples=n_resamples, seed=seed)
    return float(np.mean(p < alpha)), len(p)


def calibrated_level(null_p: np.ndarray, alpha: float) -> float:
    """The level at which the test flags at most ``chance_flag_rate(alpha)`` of the systems with
    no effect, read off their p-values ``null_p`` (``null_p_values``): the largest L with the
    share of ``null_p < L`` at most that rate, and never above ``alpha``. A bootstrap over few,
    skewed units is too liberal at its nominal level; this level gives it back its rate."""
    p = np.sort(np.asarray(null_p, dtype=np.float64))
    k = int(np.floor(chance_flag_rate(alpha) * len(p) + 1e-9))
    return float(min(alpha, p[k])) if k < len(p) else float(alpha)
