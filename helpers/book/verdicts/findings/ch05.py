"""Chapter 05's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""
from __future__ import annotations

import math

from .text import MEASURES, r_text, read, words


def findings(profile: str) -> str:
    """Chapter 05's findings: per model, measure and seed, the cross-domain r (all heads pooled)
    with its significance, the split-half r that bounds it, and whether the scores spread wider
    out of domain than in it (the paper: MTNT's BLEU moves over a wider range)."""
    lines = []
    for suffix, measure in MEASURES:
        table = read(profile, f"05_cross_domain_r{suffix}")
        pooled = table[table["paper_r"].notna()]
        for model, part in pooled.groupby("model", sort=False):
            name = str(model)
            part = part.sort_values("training_seed")
            rs = [f"{r_text(r)} (p = {p:.2g})" if not math.isnan(r) else "undefined" for r, p in zip(part["pearson_r"], part["p_value"])]
            halves = [f"{r_text(a)}/{r_text(b)}" for a, b in zip(part["split_half_r_in"], part["split_half_r_out"])]
            seeds = [int(s) for s in part["training_seed"]]
            spreads = [f"{'wider' if o > i else 'narrower'} ({o:.3g} against {i:.3g})"
                       for i, o in zip(part["spread_in"], part["spread_out"])]
            lines.append(f"**{name}, {measure}:** r = {words(rs)} across domains (seeds {words(seeds)}; the paper: "
                         f"{part['paper_r'].iloc[0]:.2f}). The split-half r, in-domain/out-of-domain: {words(halves)}. "
                         f"Out of domain the scores after masking spread {words(spreads)}.")
    return "\n\n".join(lines)
