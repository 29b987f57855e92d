"""Chapter 06's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""
from __future__ import annotations

from .text import MEASURES, read, verdicts, words, percents


def findings(profile: str) -> str:
    """Chapter 06's findings: per measure and model, the share prunable by importance, ablation
    and random orders on every seed, and how pruning everything ends."""
    lines = []
    for suffix, measure in MEASURES:
        table = read(profile, f"06_prunable_shares{suffix}")
        for (track, model), part in table.groupby(["track", "model"], sort=False):
            by = {o: p.sort_values("training_seed") for o, p in part.groupby("order")}
            imp, abl, rnd = by["importance"], by["ablation"], by["random (mean)"]
            seeds = [int(s) for s in imp["training_seed"]]
            wins = sum(i >= a for i, a in zip(imp["prunable_share"], abl["prunable_share"]))
            beats = sum(i > r for i, r in zip(imp["prunable_share"], rnd["prunable_share"]))
            paper = imp["paper_prunable_share"].iloc[0]
            lines.append(
                f"**{model}, {measure}:** by importance, {percents(imp['prunable_share'])} of the heads can go with no "
                f"noticeable loss (seed{'s' if len(seeds) > 1 else ''} {words([str(s) for s in seeds])}; the paper: "
                f"{paper:.0%}), by the one-head ablation order {percents(abl['prunable_share'])}, at random "
                f"{percents(rnd['prunable_share'])}. Importance prunes at least as much as ablation on {wins} of "
                f"{len(seeds)} seeds and more than random on {beats} of {len(seeds)}. With every head pruned the score is "
                f"{words([f'{v:.3g}' for v in imp['all_pruned']])}, against {words([f'{v:.3g}' for v in imp['unpruned']])} "
                "unpruned.")
    return "\n\n".join(lines + [verdicts(profile, "06_pruning_curves")])
