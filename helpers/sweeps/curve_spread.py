"""How much a pruning curve's summary moves with the examples it is scored on.

A curve is one score per pruning step, each computed from per-example statistics summed over the
scored set (``significance``: correctness, a confusion, sacrebleu's n-gram counts, a likelihood).
Resampling the examples with replacement, the same draw at every step of every order (paired),
gives each resample its own curve, and from it the summary a claim reads: the prunable share
(``prunable_shares``) or the score at one step relative to the unpruned one (``relative_scores``).
Their spread over resamples is the summary's sampling error: what ``between_seeds`` compares
when two training runs' verdicts differ. A prunable share is a step function of the curve, so its
bootstrap distribution is lumpy; the standard error is a rough scale, not an exact one.

    stats = score.stats(model, specs)        # [N, k] per step, as the scorers of zoo.scorers give
    curves = resampled_curves(stats, score.from_stats, indices)    # [R, steps]
    spread = Spread.of(prunable_shares(curves, shares, tolerance))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..heads.metrics import Scorer
from ..heads.significance import resampled_sums, score_rows


@dataclass(frozen=True)
class Spread:
    """A statistic's resampled values summarised: standard error and the 5th-95th percentiles."""

    se: float
    low: float
    high: float
    resamples: int

    @classmethod
    def of(cls, values: np.ndarray) -> Spread:
        values = np.asarray(values, dtype=np.float64)
        low, high = np.quantile(values, [0.05, 0.95])
        return cls(float(values.std(ddof=1)), float(low), float(high), len(values))


def resampled_curves(step_stats: Sequence[np.ndarray], score: Scorer, indices: np.ndarray) -> np.ndarray:
    """``[R, steps]``: the score of every step (``step_stats``, one ``[N, k]`` array per step, the
    same N examples in the same order) in each resample of ``indices`` ``[R, N]``."""
    sizes = {len(s) for s in step_stats}
    if len(sizes) != 1:
        raise ValueError(f"every step must be scored on the same examples; got {sorted(sizes)} examples")
    return np.stack([score_rows(score, resampled_sums(s, indices)) for s in step_stats], 1)


def prunable_shares(curves: np.ndarray, shares: Sequence[float], tolerance: float) -> np.ndarray:
    """``[R]``: each curve's prunable share, as ``pruning_curves.prunable_share`` computes it on one:
    the largest share such that every step up to it scores at least ``score at share 0 - tolerance``.
    ``curves`` ``[R, steps]`` in the order of ``shares`` (ascending, the first 0)."""
    shares = np.asarray(shares, dtype=np.float64)
    if shares[0] != 0 or np.any(np.diff(shares) <= 0):
        raise ValueError(f"shares must rise from 0, got {shares.tolist()}")
    curves = np.atleast_2d(curves)
    fails = curves < curves[:, :1] - tolerance
    first = np.where(fails.any(1), fails.argmax(1), len(shares))  # the first step below the line (none: past the end)
    return shares[first - 1]


def relative_scores(curves: np.ndarray, at: int) -> np.ndarray:
    """``[R]``: each curve's score at step ``at`` over its unpruned score (step 0); NaN where that is 0."""
    curves = np.atleast_2d(curves)
    base = curves[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(base != 0, curves[:, at] / base, np.nan)


def step_errors(values: np.ndarray) -> np.ndarray:
    """``[steps]``: the standard error of each step's statistic over resamples (``values`` ``[R,
    steps]``, e.g. ``relative_scores`` of every step); NaN where a resample leaves it undefined."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    ok = np.isfinite(values).all(0)
    out = np.full(values.shape[1], np.nan)
    out[ok] = values[:, ok].std(0, ddof=1)
    return out
