"""Chapter 06's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""
from __future__ import annotations

from ...store.columns import MIN_BAND_ORDERS, RANDOM_HIGH, RANDOM_LOW
from .text import MEASURES, percents, read, words


def findings(profile: str) -> str:
    """Chapter 06's findings: per measure and model, the share prunable by importance, by ablation
    and the random orders' band on every seed, and how pruning everything ends (the comparisons
    are the verdicts')."""
    lines = []
    for suffix, measure in MEASURES:
        table = read(profile, f"06_prunable_shares{suffix}")
        for (track, model), part in table.groupby(["track", "model"], sort=False):
            by = {o: p.sort_values("training_seed") for o, p in part.groupby("order")}
            imp, abl = by["importance"], by["ablation"]
            low, high = by[RANDOM_LOW], by[RANDOM_HIGH]
            seeds = [int(s) for s in imp["training_seed"]]
            paper = imp["paper_prunable_share"].iloc[0]
            band = words([f"{a:.0%} to {b:.0%}" for a, b in zip(low["prunable_share"], high["prunable_share"])])
            orders = int(low["random_orders"].iloc[0])
            band_is = ("5th to 95th percentile" if orders >= MIN_BAND_ORDERS else
                       f"their 5th to 95th percentile, but {orders} orders are too few for a band")
            lines.append(
                f"**{model}, {measure}:** by importance, {percents(imp['prunable_share'])} of the heads can go with no "
                f"noticeable loss (seed{'s' if len(seeds) > 1 else ''} {words([str(s) for s in seeds])}; the paper: "
                f"{paper:.0%}), by the one-head ablation order {percents(abl['prunable_share'])} (estimated on "
                f"{abl['selected_on'].iloc[0]}); {orders} random orders prune {band} ({band_is}). With every head "
                f"pruned the score is "
                f"{words([f'{v:.3g}' for v in imp['all_pruned']])}, against {words([f'{v:.3g}' for v in imp['unpruned']])} "
                "unpruned.")
    return "\n\n".join(lines)
