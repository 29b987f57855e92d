"""Chapter 09's claims (§6, Figure 5): early in training, pruning 40% of the heads hurts; later it
costs little. The rules read ``09_importance_dynamics``, on the epochs with a usable BLEU
(``dynamics.usable_epochs``, parameter ``min_base_share``)."""

from __future__ import annotations

import pandas as pd

from ...experiments.dynamics import MIN_BASE_SHARE, at_share_by_epoch, usable_epochs
from ...paper import values as paper_values
from .. import samples
from ..between_seeds import NotTestable, Value, with_error
from ..engine import NOT_REPRODUCED, Claim, Results, three_way

CHAPTER = "09_training_dynamics"
CURVES = "09_importance_dynamics"


class NoUsableBLEU(ValueError):
    """A claim on BLEU's share kept, where no checkpoint has a BLEU to keep a share of."""


def _relative_at_40(r: Results) -> pd.Series:
    """Relative BLEU with 40% pruned, by epoch, for the epochs with a usable BLEU."""
    d = r[CURVES]
    usable = usable_epochs(d, r.params.get("min_base_share", MIN_BASE_SHARE))
    if not usable:
        raise NoUsableBLEU("no checkpoint has a usable BLEU")
    return at_share_by_epoch(d, "relative").loc[usable]


def early_hurts(r: Results) -> tuple[str, str]:
    try:
        rel = _relative_at_40(r)
    except NoUsableBLEU as none:
        return f"({none})", NOT_REPRODUCED
    low = paper_values.FIGURE5_KEPT_AT_40[0]
    return f"{rel.iloc[0]:.0%} left at epoch {rel.index[0]}", three_way(rel.iloc[0] < low, rel.iloc[0] < 0.95)


def late_survives(r: Results) -> tuple[str, str]:
    try:
        rel = _relative_at_40(r)
    except NoUsableBLEU as none:
        return f"({none})", NOT_REPRODUCED
    low = paper_values.FIGURE5_KEPT_AT_40[0]
    return f"{rel.iloc[-1]:.0%} left at epoch {rel.index[-1]}", three_way(
        rel.iloc[-1] >= low, rel.iloc[-1] >= low - 0.1
    )


def _perplexity_at_40(r: Results) -> pd.Series:
    """The perplexity with 40% pruned relative to the unpruned checkpoint's, by epoch (likelihood)."""
    return at_share_by_epoch(r[CURVES], "perplexity_ratio")


def early_hurts_likelihood(r: Results) -> tuple[str, str]:
    ratio = _perplexity_at_40(r)
    return (
        f"perplexity x{ratio.iloc[0]:.2f} at epoch {ratio.index[0]}, x{ratio.iloc[-1]:.2f} at {ratio.index[-1]}",
        three_way(ratio.iloc[0] > ratio.iloc[-1] and ratio.iloc[0] > 1.10, ratio.iloc[0] > ratio.iloc[-1]),
    )


def late_survives_likelihood(r: Results) -> tuple[str, str]:
    ratio = _perplexity_at_40(r)
    return f"perplexity x{ratio.iloc[-1]:.2f} at epoch {ratio.index[-1]}", three_way(
        ratio.iloc[-1] <= 1.10, ratio.iloc[-1] <= 1.25
    )


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
        "reproduced: under 85% left at the first epoch with a "
        "usable BLEU (at least min_base_share of the last epoch's); partly: under 95%",
        CHAPTER,
        early_hurts,
        likelihood=early_hurts_likelihood,
        parameters={"min_base_share": MIN_BASE_SHARE},
        likelihood_rule="reproduced: 40% pruned raises the perplexity more at the first epoch than at the last, and "
        "by "
        "over 10%; partly: more at the first",
        sample=curves_sample,
        seed_statistic=seed_statistic("first"),
    ),
    Claim(
        "late_survives",
        "§6, Figure 5",
        "Later, 40% of the heads can go at little cost (unimportant heads emerge)",
        "85 to 90% of the BLEU left from about epoch 10",
        "reproduced: at least 85% left at the last epoch; partly: at least 75%",
        CHAPTER,
        late_survives,
        likelihood=late_survives_likelihood,
        parameters={"min_base_share": MIN_BASE_SHARE},
        likelihood_rule="reproduced: at the last epoch, 40% pruned raises the perplexity by at most 10%; partly: 25%",
        sample=curves_sample,
        seed_statistic=seed_statistic("last"),
    ),
]
