"""One answer per claim: a claim's statistic over all its training seeds at once, with
an interval, and the verdict its rule gives over that whole interval.

The book's claims are about models of a recipe, not about one trained artifact, so each claim is
judged once, on every seed's evidence together:

* a count of units (heads, layers) pools by adding the seeds' units: ``k`` of ``n`` over every
  seed, with the units the tests leave undecided (``u``) as its range ``[k, k + u]``;
* a value (a prunable share, a share of the BLEU kept, a correlation) pools as the mean over the
  seeds (``mean_over_seeds``). The seeds are scored on the same examples, so their sampling
  errors are correlated, by an unknown correlation rho >= 0. The mean's standard error is largest
  when rho = 1, where it is the mean of the seeds' errors: the interval uses that bound, so it
  holds whatever rho is (with independent seeds it is wider than it needs to be by up to
  sqrt(seeds)).

A rule maps a value (or a count) to a verdict. Read over an interval, the verdict is the strongest
one the whole interval supports (``supported``): one verdict everywhere is that verdict;
``reproduced`` in part of it and ``partly`` in the rest is ``partly`` (the claim holds at least in
part whatever the true value); any interval that reaches both ``not reproduced`` and a verdict
that supports the claim, or a rule's own ``cannot tell``, is ``cannot tell``. So ``not
reproduced`` needs the whole interval to refute the claim, and ``reproduced`` the whole interval to
support it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from .engine import CANNOT_TELL, PARTLY, REPRODUCED
from .text import interval

_INTERVAL = 0.95  # the two-sided coverage of a pooled value's interval
_GRID_POINTS = 201  # where a rule is read inside an interval (besides its ends and the estimate)


@dataclass(frozen=True)
class Pooled:
    """A value pooled over seeds: ``x`` (the mean), its interval ``low`` to ``high`` at
    ``_INTERVAL`` and each seed's value (``per_seed``, in the seeds' order)."""

    x: float
    low: float
    high: float
    per_seed: tuple[float, ...] = ()

    def text(self, fmt: str = "{:.2f}") -> str:
        """``0.31 [0.22, 0.40]``: the estimate and its interval in ``fmt``, the bounds rounded
        outward (``text.interval``); where the interval is unbounded, its sampling error undefined,
        that in words."""
        if math.isinf(self.low) or math.isinf(self.high):
            return f"{fmt.format(self.x)} (no interval: its sampling error is undefined)"
        return interval(self.x, self.low, self.high, fmt)


def interval_se(rows: pd.DataFrame, alpha: float) -> pd.Series:
    """Each row's standard error of ``delta`` read off its bootstrap interval (``delta_low``,
    ``delta_high``: the alpha and 1 - alpha quantiles, alpha / 2 on a row of two looks, which has a
    ``look``; helpers/sweeps/sequential.py): the width over 2 z, a Series on ``rows``' index."""
    looked = rows["look"].notna() if "look" in rows else pd.Series(False, index=rows.index)
    z = looked.map({True: NormalDist().inv_cdf(1 - alpha / 2), False: NormalDist().inv_cdf(1 - alpha)})
    return (rows["delta_high"] - rows["delta_low"]) / (2 * z)


def _z_of(coverage: float = _INTERVAL) -> float:
    """The normal quantile of a two-sided interval of ``coverage``."""
    return NormalDist().inv_cdf(0.5 + coverage / 2)


def mean_over_seeds(values: Sequence[float], errors: Sequence[float], coverage: float = _INTERVAL) -> Pooled:
    """The mean of the seeds' ``values`` with an interval from their standard ``errors``: the
    mean's error bounded by the mean of theirs (the seeds share their examples: see the module's
    docstring). One seed: its value and its own interval. An undefined error gives an interval of
    the whole line (nothing known of the noise)."""
    x = np.asarray(values, dtype=float)
    se = np.asarray(errors, dtype=float)
    if len(x) == 0 or len(x) != len(se):
        raise ValueError(f"{len(x)} values and {len(se)} errors: one error per seed's value is needed")
    mean, error = float(x.mean()), float(se.mean())
    if not math.isfinite(error):
        return Pooled(mean, -math.inf, math.inf, tuple(float(v) for v in x))
    half = _z_of(coverage) * error
    return Pooled(mean, mean - half, mean + half, tuple(float(v) for v in x))


def with_ranges(pooled: Pooled, lows: Sequence[float], highs: Sequence[float]) -> Pooled:
    """``pooled``'s interval widened to hold every seed's own bootstrap range (``lows`` to
    ``highs``). For a statistic read on a grid, such as a prunable share: its bootstrap error is
    lumpy and its estimate biased where the curve crosses the tolerance between steps, so the
    normal interval from the errors covered a true share of 0.4 in 72% of simulated pairs of seeds
    at 95%, the union with the seeds' 5-95% ranges in 95% (tests/test_pooling.py). A missing range
    leaves the interval as it is."""
    ends = [(lo, hi) for lo, hi in zip(lows, highs) if lo is not None and hi is not None and lo == lo and hi == hi]
    if not ends:
        return pooled
    low = min(pooled.low, *(lo for lo, _ in ends))
    high = max(pooled.high, *(hi for _, hi in ends))
    return Pooled(pooled.x, low, high, pooled.per_seed)


def supported(verdicts: Iterable[str]) -> str:
    """The strongest verdict every one of ``verdicts`` (a rule read across an interval) supports:
    see the module's docstring."""
    found = set(verdicts)
    if not found:
        raise ValueError("no verdicts to read")
    if len(found) == 1:
        return found.pop()
    if found <= {REPRODUCED, PARTLY}:
        return PARTLY
    return CANNOT_TELL


def over_interval(rule: Callable[[float], str], pooled: Pooled) -> str:
    """``rule`` (value -> verdict) read across ``pooled``'s interval (``supported``): at its ends,
    its estimate and ``_GRID_POINTS`` points between, so a rule that changes inside the interval
    (a tolerance band) is read where it changes. An unbounded interval reads as ``cannot tell``
    unless the rule gives one verdict at its estimate and at both infinities."""
    if math.isinf(pooled.low) or math.isinf(pooled.high):
        points = [pooled.low, pooled.x, pooled.high]
    else:
        points = [*np.linspace(pooled.low, pooled.high, _GRID_POINTS), pooled.x]
    return supported(rule(float(v)) for v in points)


def over_counts(rule: Callable[[int], str], down: int, undecided: int) -> str:
    """``rule`` (a count of units -> verdict) read over every count the undecided units allow,
    ``down`` to ``down + undecided`` (``supported``)."""
    return supported(rule(d) for d in range(down, down + undecided + 1))
