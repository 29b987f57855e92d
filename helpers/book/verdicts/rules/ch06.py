"""Chapter 06's claims (§4.2, Figure 3): a share of each model's heads can be pruned with no
noticeable loss, and ranking by importance prunes more than one-head ablation and than random
orders. The rules read ``06_prunable_shares``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ...paper import values as paper_values
from ...store.columns import IN_SAMPLE, MIN_BAND_ORDERS, RANDOM_HIGH, RANDOM_LOW
from .. import samples
from ..between_seeds import NotTestable, Value, with_error
from ..engine import CANNOT_TELL, NOT_RUN, SHARE_TOLERANCE, Claim, Results, by_model, present, three_way, within

CHAPTER = "06_pruning_curves"
SHARES = "06_prunable_shares"


def prunable(track: str) -> Callable[[Results], tuple[str, str]]:
    def check(r: Results) -> tuple[str, str]:
        table = r[SHARES]
        share = present(table[(table["track"] == track) & (table["order"] == "importance")], f"{SHARES}: {track}")[
            "prunable_share"
        ].iloc[0]
        return f"{share:.0%}", three_way(within(share, paper_values.PRUNABLE_SHARE[track]), share > 0)

    return check


def importance_beats_ablation(r: Results) -> tuple[str, str]:
    """Compared only on equal footing: an ablation order estimated on the very examples its curve
    scores (in-sample) has an advantage I_h (estimated on the training split) lacks."""
    shares = r[SHARES]
    table = shares.pivot(index="model", columns="order", values="prunable_share")
    text = "; ".join(f"{m}: {row['importance']:.0%} vs {row['ablation']:.0%}" for m, row in table.iterrows())
    on = shares.loc[shares["order"] == "ablation", "selected_on"] if "selected_on" in shares else pd.Series([None])
    if on.isna().any() or (on == IN_SAMPLE).any():  # a table that does not say counts as in-sample
        return text + " (the ablation order in-sample or not recorded: no fair comparison)", CANNOT_TELL
    # both at 0 (the first step already costs too much) or both at 1 (nothing costs anything): no evidence
    tied_at_an_end = (table["importance"] == table["ablation"]) & table["importance"].isin([0.0, 1.0])
    wins = (table["importance"] >= table["ablation"]) & ~tied_at_an_end
    return text, by_model(wins, tied_at_an_end)


def importance_beats_random(r: Results) -> tuple[str, str]:
    """Against the band, not one draw: importance's prunable share must lie above the 95th
    percentile of the random orders' shares, in every model (partly: in some)."""
    shares = r[SHARES]
    table = shares.pivot(index="model", columns="order", values="prunable_share")
    if RANDOM_HIGH not in table:
        return "(no band of random orders)", NOT_RUN
    orders = shares[shares["order"] == RANDOM_HIGH].set_index("model")["random_orders"].reindex(table.index)
    banded = orders >= MIN_BAND_ORDERS  # fewer orders make no 95th percentile: such a model is undecided
    above = (table["importance"] > table[RANDOM_HIGH]) & banded
    text = "; ".join(
        f"{m}: {row['importance']:.0%} vs random {row[RANDOM_LOW]:.0%} to {row[RANDOM_HIGH]:.0%} "
        + (
            f"(5-95%, {int(orders[m])} orders)"
            if banded[m]
            else f"({int(orders[m]) if orders.notna()[m] else 'too few'} orders: too few for a band)"
        )
        for m, row in table.iterrows()
    )
    return text, by_model(above, ~banded)


def share_statistic(track: str) -> Callable[[Results], dict[str, Value]]:
    """``prunable(track)``'s statistic for the between-seed test: the importance order's prunable
    share with its bootstrap standard error over the scored examples (``pruning.share_spreads``),
    the rounding error of the curve's step and its 5-95% bootstrap range (``between_seeds.Value``)."""

    def statistic(r: Results) -> dict[str, Value]:
        table = r[SHARES]
        row = present(table[(table["track"] == track) & (table["order"] == "importance")], f"{SHARES}: {track}").iloc[
            0
        ]
        return {track: with_error(row["prunable_share"], row, "share_se", track, grain=_step(row), ranged=True)}

    return statistic


def _step(row: pd.Series) -> float:
    """The curve's step (a prunable share's grid), or a LookupError for a table without it."""
    if "step" not in row or pd.isna(row["step"]):
        raise LookupError("the curves' step")
    return float(row["step"])


def ablation_statistic(r: Results) -> dict[str, Value]:
    """``importance_beats_ablation``'s statistic: per model, importance's prunable share less the
    ablation order's, with the paired bootstrap's standard error of that difference and the
    rounding error of two values on the step's grid (a grain of step * sqrt 2)."""
    shares = r[SHARES]
    out = {}
    for model, part in shares[shares["order"].isin(["importance", "ablation"])].groupby("model", sort=False):
        by_order = part.set_index("order")
        importance = by_order.loc["importance"]
        out[model] = with_error(
            importance["prunable_share"] - by_order.loc["ablation", "prunable_share"],
            importance,
            "minus_ablation_se",
            model,
            grain=_step(importance) * np.sqrt(2),
        )
    return out


def band_statistic(r: Results) -> dict[str, Value]:
    """``importance_beats_random``'s statistic: per model, importance's prunable share less the top
    of the random band (95th percentile), with the standard errors of both combined as independent:
    the share's over the scored examples (``share_se``), the percentile's over the random orders
    (``band_se``), and the rounding error of two values on the step's grid. The random orders' own
    sampling error over examples is left out (the band is about orders); a bootstrap of the 95th
    percentile of 20 orders understates its uncertainty, which the grid's rounding error bounds from
    below. A model whose band has too few orders is left out, as the rule leaves it undecided."""
    shares = r[SHARES]
    out = {}
    for model, part in shares.groupby("model", sort=False):
        by_order = part.set_index("order")
        if RANDOM_HIGH not in by_order.index:
            raise NotTestable("no band of random orders")
        importance, high = by_order.loc["importance"], by_order.loc[RANDOM_HIGH]
        if not high["random_orders"] >= MIN_BAND_ORDERS:  # no band: the rule leaves this model undecided
            continue
        share, band = (
            with_error(importance["prunable_share"], importance, "share_se", model),
            with_error(high["prunable_share"], high, "band_se", f"{model}'s band"),
        )
        out[model] = Value(share.x - band.x, float(np.hypot(share.se, band.se)), grain=_step(importance) * np.sqrt(2))
    if not out:
        raise NotTestable(f"no model has a band of at least {MIN_BAND_ORDERS} random orders")
    return out


def shares_sample(r: Results) -> str:
    return samples.curves(r[SHARES])


CLAIMS = [
    Claim(
        "prunable_translation",
        "§4.2, Figure 3",
        "A share of the translation model's heads can be pruned with no noticeable loss",
        f"about {paper_values.PRUNABLE_SHARE['translation']:.0%} (WMT, within 1 BLEU)",
        f"reproduced: within {SHARE_TOLERANCE:.0%} of the paper's share; partly: above 0",
        CHAPTER,
        prunable("translation"),
        likelihood=True,
        sample=shares_sample,
        seed_statistic=share_statistic("translation"),
    ),
    Claim(
        "prunable_classifier",
        "§4.2, Figure 3",
        "A share of the classifier's heads can be pruned with no noticeable loss",
        f"about {paper_values.PRUNABLE_SHARE['classifier']:.0%} (BERT, within 1 accuracy point)",
        f"reproduced: within {SHARE_TOLERANCE:.0%} of the paper's share; partly: above 0",
        CHAPTER,
        prunable("classifier"),
        likelihood=True,
        sample=shares_sample,
        seed_statistic=share_statistic("classifier"),
    ),
    Claim(
        "importance_beats_ablation",
        "§4.2, Figure 3",
        "Ranking by importance prunes at least as well as ranking by one-head ablation",
        "importance above the ablation curve",
        "reproduced: importance's prunable share >= ablation's for every "
        "model, both orders estimated on data the curves do not score (else cannot tell); partly: for some",
        CHAPTER,
        importance_beats_ablation,
        likelihood=True,
        sample=shares_sample,
        seed_statistic=ablation_statistic,
    ),
    Claim(
        "importance_beats_random",
        "§4.2, Figure 3",
        "Ranking by importance prunes more than pruning at random",
        "no random baseline in Figure 3 (Budhraja et al. 2020 find random pruning comes close)",
        "reproduced: importance's prunable share above the 95th percentile of the random orders' shares for every "
        f"model; partly: for some; cannot tell: a model's band has too few orders (under {MIN_BAND_ORDERS})",
        CHAPTER,
        importance_beats_random,
        likelihood=True,
        sample=shares_sample,
        seed_statistic=band_statistic,
    ),
]
