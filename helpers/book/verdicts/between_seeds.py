"""Do the training seeds differ on a claim beyond sampling noise?

The verdict is read on every seed's evidence at once (``engine.judge``, ``pooling``); this test
is the separate ``seeds differ`` column beside it, and never changes the verdict. It reads the
claim's own statistic per seed (``Claim.seed_statistic``: per seed, ``{component: estimate}``,
e.g. one share of heads per model):

* ``Share(k, n, u)``: k of n units (heads, layers) counted, u more that the tests leave
  undecided; a component differs when Pearson's chi-square test of homogeneity on the 2 x seeds
  table rejects *and* the seeds' ranges ``[k, k + u]`` do not overlap (the undecided units cannot
  reconcile them);
* ``Value(x, se)``: an estimate with its standard error (a bootstrap's over examples); compared
  by Cochran's Q, ``sum w (x - weighted mean)^2`` with ``w = 1 / se^2`` (``df = seeds - 1``).
  Where the values carry bootstrap ranges (a prunable share, a step statistic), the component
  differs only if the ranges are also disjoint;
* ``Pairs(x, y)``: the units of a correlation (heads); compared by a permutation test of the
  units between the seeds (``_pairs``).

The components are tested one at a time, and the claim's seeds differ when some component does at
``SEED_LEVEL`` after a Bonferroni correction over the components: components share heads and
examples (a model's three removal kinds, two protocols on the same layers), and adding their
statistics as if independent inflated the rate. The seeds are scored on the same
examples, which correlates their numbers positively: treating them as independent overstates the
noise of their difference, so each component's test errs toward "no".

``tests/test_between_seeds.py`` measures the false-alarm rate by simulation on data shaped like the
claims': two alike seeds whose heads' effects have heavy tails (t with 2 and 4 degrees of freedom)
and whose examples are shared (a common shift per example); the rate must stay within 1.5 times
``SEED_LEVEL``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

SEED_LEVEL = 0.05  # the family-wise level at which the seeds "differ"


@dataclass(frozen=True)
class Share:
    """``k`` of ``n`` units, and ``u`` more the tests leave undecided."""

    k: int
    n: int
    u: int = 0


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


@dataclass(frozen=True)
class Pairs:
    """The units of a correlation (heads), each with its two measures ``x`` and ``y`` (a head's
    change in and out of domain). Seeds' correlations are compared by a permutation test over the
    units (``_pairs``): exact for alike seeds whatever the units' distribution, where Fisher's z
    with 1 / sqrt(n - 3), and a bootstrap's error too, called alike seeds with heavy-tailed heads
    different far more often than the level (tests/test_between_seeds.py). The units carry the
    examples' sampling error; the chapters score every seed on the same examples, so that error is
    common to the seeds and the permutation holds its level (simulated, with each seed's heads
    leaning their own way too); seeds scored on examples of their own would need a test over
    examples instead."""

    x: tuple[float, ...]
    y: tuple[float, ...]


_Estimate = Share | Value | Pairs
_PERMUTATIONS = 2000  # of the units between seeds, for a correlation's test


@dataclass(frozen=True)
class _SeedTest:
    """The seeds' homogeneity, component by component: the ``component`` with the smallest
    ``p`` (before correction), the number of components tested, and whether any component
    ``differ``\\ s at ``SEED_LEVEL`` after the Bonferroni correction (and its range condition)."""

    component: str
    p: float
    components: int
    differ: bool

    @property
    def corrected_p(self) -> float:
        return min(1.0, self.p * self.components)

    def text(self) -> str:
        over = f", Bonferroni over {self.components} statistics" if self.components > 1 else ""
        if self.differ:
            return (
                f"yes: the seeds differ beyond sampling noise on {self.component} (p = {self.corrected_p:.2g}{over})"
            )
        return (
            f"no: the seeds' numbers do not differ beyond sampling noise (smallest p = {self.corrected_p:.2g}{over})"
        )


def _shares(parts: list[Share]) -> tuple[float, bool] | None:
    """Pearson's chi-square p of the 2 x seeds table of ``parts``, and whether the seeds' ranges
    ``[k, k + u]`` are disjoint; None where nothing varies (every seed 0 of n, or n of n)."""
    from scipy.stats import chi2

    k = np.array([p.k for p in parts], dtype=float)
    n = np.array([p.n for p in parts], dtype=float)
    pooled = k.sum() / n.sum()
    if pooled in (0.0, 1.0):
        return None
    expected_yes, expected_no = n * pooled, n * (1 - pooled)
    statistic = float((((k - expected_yes) ** 2) / expected_yes + (((n - k) - expected_no) ** 2) / expected_no).sum())
    apart = max(p.k for p in parts) > min(p.k + p.u for p in parts)
    return float(chi2.sf(statistic, len(parts) - 1)), apart


def _values(parts: list[Value]) -> tuple[float, bool] | None:
    """Cochran's Q p of ``parts`` (each weighted by ``1 / error^2``), and whether their bootstrap
    ranges are disjoint (True where they keep none); None where an error is 0 or not finite."""
    from scipy.stats import chi2

    se = np.array([p.error for p in parts], dtype=float)
    x = np.array([p.x for p in parts], dtype=float)
    if not np.all(np.isfinite(se) & (se > 0)) or not np.all(np.isfinite(x)):
        return None
    w = 1 / se**2
    mean = (w * x).sum() / w.sum()
    q = float((w * (x - mean) ** 2).sum())
    ranged = all(p.low is not None and p.high is not None for p in parts)
    apart = not ranged or max(p.low for p in parts) > min(p.high for p in parts)
    return float(chi2.sf(q, len(parts) - 1)), apart


def _correlations(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of each row of ``x`` with the same row of ``y`` (0 where a row does not vary)."""
    x, y = x - x.mean(-1, keepdims=True), y - y.mean(-1, keepdims=True)
    scale = np.sqrt((x * x).sum(-1) * (y * y).sum(-1))
    return np.divide((x * y).sum(-1), scale, out=np.zeros(scale.shape), where=scale > 0)


def _pairs(parts: list[Pairs], permutations: int = _PERMUTATIONS, seed: int = 0) -> tuple[float, bool] | None:
    """A permutation test that the seeds' correlations are alike: the spread of their Fisher z
    (the variance over seeds, each seed's units kept in number) against its spread when the
    units are dealt to the seeds at random; p with the observed deal counted among the deals.
    None where a seed has fewer than 4 units."""
    sizes = [len(p.x) for p in parts]
    if min(sizes) < 4:
        return None
    x = np.concatenate([np.asarray(p.x, dtype=float) for p in parts])
    y = np.concatenate([np.asarray(p.y, dtype=float) for p in parts])
    bounds = np.cumsum([0, *sizes])

    def spread(order: np.ndarray) -> np.ndarray:
        z = [
            np.arctanh(np.clip(_correlations(x[order[..., a:b]], y[order[..., a:b]]), -0.999999, 0.999999))
            for a, b in zip(bounds[:-1], bounds[1:])
        ]
        return np.var(np.stack(z, -1), axis=-1)

    rng = np.random.default_rng(seed)
    observed = spread(np.arange(len(x)))
    dealt = spread(np.argsort(rng.random((permutations, len(x))), axis=1))
    return float((1 + (dealt >= observed - 1e-12).sum()) / (1 + permutations)), True


def seeds_differ(per_seed: Mapping[object, Mapping[str, _Estimate]]) -> _SeedTest | None:
    """The homogeneity test over the seeds of ``per_seed`` (``{seed: {component: estimate}}``),
    on the components every seed has, one at a time with a Bonferroni correction; None where
    fewer than two seeds or nothing to test."""
    if len(per_seed) < 2:
        return None
    seeds = list(per_seed.values())
    common = [c for c in seeds[0] if all(c in s for s in seeds[1:])]
    tested: dict[str, tuple[float, bool]] = {}
    for component in common:
        parts = [s[component] for s in seeds]
        if all(isinstance(p, Share) for p in parts):
            found = _shares(parts)
        elif all(isinstance(p, Value) for p in parts):
            found = _values(parts)
        elif all(isinstance(p, Pairs) for p in parts):
            found = _pairs(parts)
        else:
            raise TypeError(f"component {component!r} mixes shares and values across seeds")
        if found is not None:
            tested[component] = found
    if not tested:
        return None
    m = len(tested)
    differing = [c for c, (p, apart) in tested.items() if p * m < SEED_LEVEL and apart]
    component = min(differing or tested, key=lambda c: tested[c][0])
    return _SeedTest(component, tested[component][0], m, bool(differing))


def fisher_z(r: float, n: int) -> Value:
    """A Pearson r over ``n`` units as Fisher's z with its standard error 1 / sqrt(n - 3). The
    error assumes normal units; the claims' between-seed tests use a bootstrap over the heads
    instead (``chapters.ch05_cross_domain``)."""
    return Value(math.atanh(max(min(r, 0.999999), -0.999999)), 1 / math.sqrt(n - 3)) if n > 3 else Value(r, math.inf)


class NotTestable(LookupError):
    """A seed's statistic cannot be formed (e.g. no checkpoint has a BLEU to keep a share of); the
    message says why, and the engine prints it after "not tested"."""


def with_error(x: float, row, *, column: str, what: str, grain: float = 0.0, ranged: bool = False) -> Value:
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
