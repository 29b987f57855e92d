"""Chapter 08's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

from ...paper.values import HEADS_PER_KIND
from .text import read, words


def findings(profile: str) -> str:
    """Chapter 08's findings: per seed, the attention kind that suffers most at 80% pruned, on
    BLEU (share kept) and on the likelihood (perplexity reached), after the heads of each kind."""
    bleu = read(profile, "08_pruning_by_kind_summary")
    ll = read(profile, "08_pruning_by_kind_summary_likelihood")
    curves = read(profile, "08_pruning_by_kind")
    first = curves[curves["training_seed"] == curves["training_seed"].iloc[0]]
    heads = first.groupby("kind", sort=False)["pruned"].max()
    step = sorted(first["share"].unique())[1] if first["share"].nunique() > 1 else 1.0
    lines = [
        f"**The model:** {words([f'{int(n)} {k} heads' for k, n in heads.items()])} (the paper's WMT: "
        f"{HEADS_PER_KIND['WMT']} of each kind), pruned {step:.0%} of a kind at a time."
    ]
    for seed, part in bleu.groupby("training_seed"):
        kept = ", ".join(f"{k} {v:.0%}" for k, v in zip(part["kind"], part["relative_80%"]))
        worst = part.loc[part["relative_80%"].idxmin(), "kind"] if part["relative_80%"].notna().any() else "undefined"
        mine = ll[ll["training_seed"] == seed]
        ratios = ", ".join(f"{k} x{v:.2f}" for k, v in zip(mine["kind"], mine["perplexity_ratio_80%"]))
        worst_ll = (
            mine.loc[mine["perplexity_ratio_80%"].idxmax(), "kind"]
            if mine["perplexity_ratio_80%"].notna().any()
            else "undefined"
        )
        lines.append(
            f"**Seed {int(seed)}:** with 80% of a kind's heads pruned, the share of the BLEU kept is {kept} "
            f"(lowest here: {worst}); "
            f"the perplexity reaches {ratios} times the unpruned model's (highest here: {worst_ll}"
            ")."
        )
    return "\n\n".join(lines)
