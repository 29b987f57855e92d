"""Chapter 10's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

import pandas as pd

from .text import percents, read, words


def findings(profile: str) -> str:
    """Chapter 10's findings: per task, the share prunable within tolerance on every seed, on the
    task's metric and on the likelihood, beside the paper's flat stretch, and the score left with
    90% of the heads pruned."""
    bleu = read(profile, "10_appendix_summary")
    ll = read(profile, "10_appendix_summary_likelihood")
    lines = []
    for model, part in bleu.groupby("model", sort=False):
        mine = ll[ll["model"] == model].sort_values("training_seed")
        part = part.sort_values("training_seed")
        paper = part["paper_flat_until"].iloc[0]
        versus = "" if pd.isna(paper) else f" (the paper's {part['paper_task'].iloc[0]}: flat to about {paper:.0%})"
        lines.append(
            f"**{model}:** {percents(part['prunable_share'])} of the heads can go within the tolerance on "
            f"{part['metric'].iloc[0]}, {percents(mine['prunable_share'])} with the perplexity within 1%"
            f"{versus}. With 90% pruned the score is {words([f'{v:.3g}' for v in part['score_90%_pruned']])}, "
            f"against {words([f'{v:.3g}' for v in part['unpruned']])} unpruned."
        )
    return "\n\n".join(lines)
