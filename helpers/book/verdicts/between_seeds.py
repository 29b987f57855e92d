"""Do the training seeds truly differ on a claim, or only its verdicts? (issue 55, item 4)

Where a claim's verdict differs between seeds, the engine asks whether the seeds' numbers differ
by more than their sampling noise, on the claim's own statistic (``Claim.seed_statistic``: per
seed, ``{component: estimate}``, e.g. one share of heads per model):

* ``Share(k, n)``: k of n units (heads, layers) counted; the seeds' shares are compared by
  Pearson's chi-square test of homogeneity on the 2 x seeds table (``df = seeds - 1``);
* ``Value(x, se)``: an estimate with its standard error (a Fisher-z correlation, a change in
  BLEU); compared by Cochran's Q, ``sum w (x - weighted mean)^2`` with ``w = 1 / se^2``.

The components' statistics and degrees of freedom add up (treated as independent samples per
component and per seed) to one chi-square test (``seeds_differ``). The seeds are in fact scored on
the same examples, which correlates their numbers positively: treating them as independent
overstates the noise of their difference, so the test leans toward "cannot tell" (a paired test
would need every resample kept). A component with no variation to test (every seed 0
of n, or n of n; a standard error of 0) adds nothing. Where the seeds differ at ``SEED_LEVEL``,
the claim "depends on the seed"; where they do not, the evidence on the seeds together cannot
separate their verdicts, and the claim's verdict is "cannot tell".

Both tests are large-sample approximations: with few units (18 layers) they are rough, and the
text gives the statistic and df so a reader can judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

SEED_LEVEL = 0.05  # the seeds "differ" when the homogeneity test's p is below this


@dataclass(frozen=True)
class Share:
    """``k`` of ``n`` units."""

    k: int
    n: int


@dataclass(frozen=True)
class Value:
    """An estimate ``x`` with its standard error ``se``. A statistic read on a grid (a prunable
    share moves in steps of the curve's ``grain``) also carries the grid's rounding error,
    ``grain / sqrt(12)``, added to ``se`` in quadrature (``error``): its bootstrap error alone is
    lumpy and often 0, which would make any one-step difference look certain. ``low`` and
    ``high``: its 5-95% bootstrap range, where kept (``seeds_differ`` reads overlaps)."""

    x: float
    se: float
    grain: float = 0.0
    low: float | None = None
    high: float | None = None

    @property
    def error(self) -> float:
        return math.hypot(self.se, self.grain / math.sqrt(12))


Estimate = Share | Value


@dataclass(frozen=True)
class SeedTest:
    """The homogeneity test over seeds: chi-square ``statistic`` on ``df`` degrees of freedom, ``p``."""

    statistic: float
    df: int
    p: float
    ranges_overlap: bool = False  # every component with bootstrap ranges has them overlapping across seeds

    @property
    def differ(self) -> bool:
        return self.p < SEED_LEVEL and not self.ranges_overlap

    def text(self) -> str:
        if self.p < SEED_LEVEL and self.ranges_overlap:
            return (
                f"the homogeneity test puts the seeds apart (chi-square {self.statistic:.1f}, df {self.df}, "
                f"p = {self.p:.2g}), but their 5-95% bootstrap ranges overlap: together they cannot separate the "
                "verdicts"
            )
        if self.differ:
            return (
                f"the seeds differ beyond sampling noise (chi-square {self.statistic:.1f}, df {self.df}, p = "
                f"{self.p:.2g})"
            )
        return (
            f"the seeds' numbers do not differ beyond sampling noise (chi-square {self.statistic:.1f}, df {self.df}, "
            f"p = {self.p:.2g}): together they cannot separate the verdicts"
        )


def _shares(parts: list[Share]) -> tuple[float, int]:
    """Pearson's chi-square of the 2 x seeds table of ``parts``; (0, 0) where nothing varies."""
    k = np.array([p.k for p in parts], dtype=float)
    n = np.array([p.n for p in parts], dtype=float)
    pooled = k.sum() / n.sum()
    if pooled in (0.0, 1.0):
        return 0.0, 0
    expected_yes, expected_no = n * pooled, n * (1 - pooled)
    statistic = float((((k - expected_yes) ** 2) / expected_yes + (((n - k) - expected_no) ** 2) / expected_no).sum())
    return statistic, len(parts) - 1


def _values(parts: list[Value]) -> tuple[float, int]:
    """Cochran's Q of ``parts`` (each weighted by ``1 / error^2``); (0, 0) where an error is 0 or
    not finite."""
    se = np.array([p.error for p in parts], dtype=float)
    x = np.array([p.x for p in parts], dtype=float)
    if not np.all(np.isfinite(se) & (se > 0)) or not np.all(np.isfinite(x)):
        return 0.0, 0
    w = 1 / se**2
    mean = (w * x).sum() / w.sum()
    return float((w * (x - mean) ** 2).sum()), len(parts) - 1


def seeds_differ(per_seed: Mapping[object, Mapping[str, Estimate]]) -> SeedTest | None:
    """The homogeneity test over the seeds of ``per_seed`` (``{seed: {component: estimate}}``),
    on the components every seed has; None where fewer than two seeds or nothing to test. Where
    components keep bootstrap ranges (prunable shares), the seeds differ only if, besides the
    test, some component's ranges are disjoint across seeds: a step statistic's bootstrap error is
    rough (a simulation of two alike models on independent examples, with the test alone, called
    them different 11-16% of the time at a 5% level; ``tests/test_between_seeds.py``)."""
    if len(per_seed) < 2:
        return None
    seeds = list(per_seed.values())
    common = [c for c in seeds[0] if all(c in s for s in seeds[1:])]
    statistic, df, ranged, apart = 0.0, 0, False, False
    for component in common:
        parts = [s[component] for s in seeds]
        if all(isinstance(p, Share) for p in parts):
            found = _shares(parts)
        elif all(isinstance(p, Value) for p in parts):
            found = _values(parts)
        else:
            raise TypeError(f"component {component!r} mixes shares and values across seeds")
        statistic, df = statistic + found[0], df + found[1]
        if all(isinstance(p, Value) and p.low is not None and p.high is not None for p in parts):
            ranged = True
            apart = apart or max(p.low for p in parts) > min(p.high for p in parts)
    if df == 0:
        return None
    from scipy.stats import chi2

    return SeedTest(statistic, df, float(chi2.sf(statistic, df)), ranges_overlap=ranged and not apart)


def fisher_z(r: float, n: int) -> Value:
    """A Pearson r over ``n`` units as Fisher's z with its standard error 1 / sqrt(n - 3)."""
    return Value(math.atanh(max(min(r, 0.999999), -0.999999)), 1 / math.sqrt(n - 3)) if n > 3 else Value(r, math.inf)


class NotTestable(LookupError):
    """A seed's statistic cannot be formed (e.g. no checkpoint has a BLEU to keep a share of); the
    message says why, and the engine prints it after "not tested"."""


def with_error(x: float, row, column: str, what: str, grain: float = 0.0, ranged: bool = False) -> Value:
    """``Value(x, row[column])``: an estimate with the sampling error a result table keeps beside it
    (a bootstrap's, e.g. a prunable share's ``share_se``), or a LookupError naming what is missing
    (a table of an older run) or ``NotTestable`` where it is NaN: the engine then says the seeds
    were not tested, and why. ``grain``: the grid the estimate moves on (``Value``); ``ranged``:
    take the row's ``share_low`` and ``share_high`` as its bootstrap range."""
    if column not in row:
        raise LookupError(f"{column} of {what}")
    if row[column] != row[column]:  # NaN: e.g. a BLEU of 0 in some resample, with no share of it to keep
        raise NotTestable(f"the sampling error of {what} is undefined")
    if ranged:  # the 5-95% bootstrap range beside the error: share_low / share_high
        return Value(float(x), float(row[column]), grain, float(row["share_low"]), float(row["share_high"]))
    return Value(float(x), float(row[column]), grain)
