"""Chapter 08's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""
from __future__ import annotations

from .text import read, verdicts


def findings(profile: str) -> str:
    """Chapter 08's findings: per seed, the attention kind that suffers most at 80% pruned, on
    BLEU (share kept) and on the likelihood (perplexity reached)."""
    bleu = read(profile, "08_pruning_by_kind_summary")
    ll = read(profile, "08_pruning_by_kind_summary_likelihood")
    lines = []
    for seed, part in bleu.groupby("training_seed"):
        kept = ", ".join(f"{k} {v:.0%}" for k, v in zip(part["kind"], part["relative_80%"]))
        worst = part.loc[part["relative_80%"].idxmin(), "kind"] if part["relative_80%"].notna().any() else "undefined"
        mine = ll[ll["training_seed"] == seed]
        ratios = ", ".join(f"{k} x{v:.2f}" for k, v in zip(mine["kind"], mine["perplexity_ratio_80%"]))
        worst_ll = mine.loc[mine["perplexity_ratio_80%"].idxmax(), "kind"] if mine["perplexity_ratio_80%"].notna().any() \
            else "undefined"
        lines.append(f"**Seed {int(seed)}:** with 80% of a kind's heads pruned, the share of the BLEU kept is {kept} "
                     f"(most sensitive: {worst}); "
                     f"the perplexity reaches {ratios} times the unpruned model's (most sensitive: {worst_ll}"
                     ").")
    return "\n\n".join(lines + [verdicts(profile, "08_attention_kinds")])
