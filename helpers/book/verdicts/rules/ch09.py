"""Chapter 09's claims (§6, Figure 5): early in training, pruning 40% of the heads hurts; later it
costs little. The rules read ``09_importance_dynamics``, on the epochs with a usable BLEU
(``dynamics.usable_epochs``, parameter ``min_base_share``)."""

from __future__ import annotations

import math

import pandas as pd

from ...experiments.dynamics import MIN_BASE_SHARE, at_share_by_epoch, usable_epochs
from ...paper import values as paper_values
from .. import samples
from ..between_seeds import NotTestable, Value, with_error
from ..engine import CANNOT_TELL, Claim, Results, three_way
from ..pooling import Pooled, mean_over_seeds, over_interval, supported

CHAPTER = "09_training_dynamics"
CURVES = "09_importance_dynamics"


class NoUsableBLEU(ValueError):
    """A claim on BLEU's share kept, where no checkpoint has a BLEU to keep a share of."""


def _runs(r: Results) -> list[pd.DataFrame]:
    """The curves of each training run (seed) in ``r``."""
    d = r[CURVES]
    if "training_seed" not in d:
        return [d]
    return [part for _, part in d.groupby("training_seed", sort=True)]


def _at_40(run: pd.DataFrame, column: str, epoch: int) -> tuple[float, float]:
    """``column`` with 40% pruned at ``epoch`` of one run, with its bootstrap standard error
    (``<column>_se``; NaN where the table has none)."""
    value = at_share_by_epoch(run, column).loc[epoch]
    se = at_share_by_epoch(run, f"{column}_se").loc[epoch] if f"{column}_se" in run else float("nan")
    return float(value), float(se)


def _relative(r: Results, which: int) -> tuple[Pooled, list[int]]:
    """The share of the BLEU left with 40% pruned at each run's first (``which`` 0) or last (-1)
    epoch with a usable BLEU (``dynamics.usable_epochs``), pooled over the runs; and those epochs."""
    found, epochs = [], []
    for run in _runs(r):
        usable = usable_epochs(run, r.params.get("min_base_share", MIN_BASE_SHARE))
        if not usable:
            raise NoUsableBLEU("no checkpoint has a usable BLEU")
        epochs.append(usable[which])
        found.append(_at_40(run, "relative", usable[which]))
    return mean_over_seeds([v for v, _ in found], [e for _, e in found]), epochs


def _epochs(epochs: list[int]) -> str:
    return f"epoch {epochs[0]}" if len(set(epochs)) == 1 else f"epochs {', '.join(map(str, epochs))}"


def _seeds(r: Results) -> str:
    return f" ({len(r.seeds)} seeds pooled)" if len(r.seeds) > 1 else ""


def early_hurts(r: Results) -> tuple[str, str]:
    """Under 85% of the BLEU left at the first usable epoch (partly: under 95%), pooled over the
    seeds and read over its interval. No usable BLEU: cannot tell."""
    try:
        rel, epochs = _relative(r, 0)
    except NoUsableBLEU as none:
        return f"({none})", CANNOT_TELL
    low = paper_values.FIGURE5_KEPT_AT_40[0]
    verdict = over_interval(lambda v: three_way(v < low, v < 0.95), rel)
    return f"{rel.text('{:.0%}')} left at {_epochs(epochs)}{_seeds(r)}", verdict


def late_survives(r: Results) -> tuple[str, str]:
    """At least 85% of the BLEU left at the last epoch (partly: 75%), pooled over the seeds and
    read over its interval. No usable BLEU: cannot tell."""
    try:
        rel, epochs = _relative(r, -1)
    except NoUsableBLEU as none:
        return f"({none})", CANNOT_TELL
    low = paper_values.FIGURE5_KEPT_AT_40[0]
    verdict = over_interval(lambda v: three_way(v >= low, v >= low - 0.1), rel)
    return f"{rel.text('{:.0%}')} left at {_epochs(epochs)}{_seeds(r)}", verdict


def _ratios(r: Results) -> tuple[Pooled, Pooled, Pooled]:
    """The perplexity ratio with 40% pruned at each run's first and last epoch, and the first less
    the last (its error as if the epochs were independent: they share examples, which only makes
    it wider than it is), each pooled over the runs."""
    first, last, gap = [], [], []
    for run in _runs(r):
        epochs = sorted(run["epoch"].unique())
        a, b = _at_40(run, "perplexity_ratio", epochs[0]), _at_40(run, "perplexity_ratio", epochs[-1])
        first.append(a)
        last.append(b)
        gap.append((a[0] - b[0], math.hypot(a[1], b[1])))
    pool = lambda found: mean_over_seeds([v for v, _ in found], [e for _, e in found])
    return pool(first), pool(last), pool(gap)


def early_hurts_likelihood(r: Results) -> tuple[str, str]:
    """Pruning 40% raises the perplexity more at the first epoch than at the last (the gap's
    interval above 0) and by over 10% (the first ratio's interval above 1.10): reproduced; only
    the first: partly; read over every state the two intervals allow."""
    first, last, gap = _ratios(r)
    more = _possible(gap.low > 0, gap.high <= 0)
    large = _possible(first.low > 1.10, first.high <= 1.10)
    verdict = supported(three_way(m and g, m) for m in more for g in large)
    text = (
        f"perplexity x{first.text()} at the first epoch, x{last.text()} at the last (gap {gap.text('{:+.2f}')})"
        + _seeds(r)
    )
    return text, verdict


def late_survives_likelihood(r: Results) -> tuple[str, str]:
    _, last, _ = _ratios(r)
    verdict = over_interval(lambda v: three_way(v <= 1.10, v <= 1.25), last)
    return f"perplexity x{last.text()} at the last epoch{_seeds(r)}", verdict


def _possible(surely: bool, surely_not: bool) -> set[bool]:
    """The truth values a condition read on an interval can take."""
    return {True} if surely else {False} if surely_not else {True, False}


def _perplexity_at_40(r: Results) -> pd.Series:
    """The perplexity with 40% pruned relative to the unpruned checkpoint's, by epoch (likelihood;
    one run)."""
    return at_share_by_epoch(r[CURVES], "perplexity_ratio")


def _relative_at_40(r: Results) -> pd.Series:
    """Relative BLEU with 40% pruned, by epoch, for the epochs with a usable BLEU (one run)."""
    d = r[CURVES]
    usable = usable_epochs(d, r.params.get("min_base_share", MIN_BASE_SHARE))
    if not usable:
        raise NoUsableBLEU("no checkpoint has a usable BLEU")
    return at_share_by_epoch(d, "relative").loc[usable]


def _at_40_with_error(r: Results, column: str, epochs: dict[str, int]) -> dict[str, Value]:
    """``column`` with 40% pruned at each of ``epochs`` (``{role: epoch}``, e.g. the first usable
    one, compared between seeds by role), with its bootstrap standard error (``<column>_se``,
    ``dynamics.checkpoint_curves``), as the between-seed test's components."""
    table = r[CURVES]
    if f"{column}_se" not in table:
        raise LookupError(f"{column}_se")
    value, error = at_share_by_epoch(table, column), at_share_by_epoch(table, f"{column}_se")
    return {role: with_error(value.loc[e], error, e, f"{column} at epoch {e}") for role, e in epochs.items()}


def seed_statistic(which: str):
    """The claim's statistic per seed, ``which`` epoch of it (``"first"`` or ``"last"``; on the
    likelihood, the early claim reads both): the share of the BLEU left with 40% pruned at the
    first or last usable epoch, or the perplexity ratio there."""

    def statistic(r: Results) -> dict[str, Value]:
        try:
            return _statistic(r)
        except NoUsableBLEU as none:
            raise NotTestable(f"{none} on one seed") from None

    def _statistic(r: Results) -> dict[str, Value]:
        if r.measure:
            ratio = _perplexity_at_40(r)
            first, last = {"first epoch": ratio.index[0]}, {"last epoch": ratio.index[-1]}
            return _at_40_with_error(r, "perplexity_ratio", {**first, **last} if which == "first" else last)
        rel = _relative_at_40(r)
        return _at_40_with_error(r, "relative", {f"{which} usable epoch": rel.index[0 if which == "first" else -1]})

    return statistic


def curves_sample(r: Results) -> str:
    d = r[CURVES]
    epochs = ", ".join(str(int(e)) for e in sorted(d["epoch"].unique()))
    return samples.curves(d) + f"; checkpoints at epochs {epochs}" if samples.curves(d) else ""


CLAIMS = [
    Claim(
        "early_hurts",
        "§6, Figure 5",
        "Early in training, pruning 40% of the heads hurts",
        "well under 85% of the BLEU left in epochs 1-2",
        "reproduced: under 85% left at the first epoch with a usable BLEU (at least min_base_share of the last "
        "epoch's); partly: under 95%; read over the 95% interval of the share pooled over the seeds (cannot tell: no "
        "usable BLEU)",
        CHAPTER,
        early_hurts,
        likelihood=early_hurts_likelihood,
        parameters={"min_base_share": MIN_BASE_SHARE},
        likelihood_rule="reproduced: 40% pruned raises the perplexity more at the first epoch than at the last, and "
        "by over 10%; partly: more at the first; each read over its 95% interval pooled over the seeds",
        sample=curves_sample,
        seed_statistic=seed_statistic("first"),
    ),
    Claim(
        "late_survives",
        "§6, Figure 5",
        "Later, 40% of the heads can go at little cost (unimportant heads emerge)",
        "85 to 90% of the BLEU left from about epoch 10",
        "reproduced: at least 85% left at the last epoch; partly: at least 75%; read over the 95% interval of the "
        "share pooled over the seeds (cannot tell: no usable BLEU)",
        CHAPTER,
        late_survives,
        likelihood=late_survives_likelihood,
        parameters={"min_base_share": MIN_BASE_SHARE},
        likelihood_rule="reproduced: at the last epoch, 40% pruned raises the perplexity by at most 10%; partly: 25%; "
        "read over the 95% interval of the ratio pooled over the seeds",
        sample=curves_sample,
        seed_statistic=seed_statistic("last"),
    ),
]
