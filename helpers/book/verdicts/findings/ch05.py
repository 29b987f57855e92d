"""Chapter 05's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

import math

import pandas as pd

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
            rs = [
                f"{r_text(r)} (p = {p:.2g})" if not math.isnan(r) else "undefined"
                for r, p in zip(part["pearson_r"], part["p_value"])
            ]
            halves = [f"{r_text(a)}/{r_text(b)}" for a, b in zip(part["split_half_r_in"], part["split_half_r_out"])]
            seeds = [int(s) for s in part["training_seed"]]
            spreads = [
                f"{'wider' if o > i else 'narrower'} ({o:.3g} against {i:.3g})"
                for i, o in zip(part["spread_in"], part["spread_out"])
            ]
            lines.append(
                f"**{name}, {measure}:** r = {words(rs)} across domains (seeds {words(seeds)}; the paper: "
                f"{part['paper_r'].iloc[0]:.2f}). The split-half r, in-domain/out-of-domain: {words(halves)}. "
                f"Out of domain the scores after masking spread {words(spreads)}."
            )
    return "\n\n".join(lines + class_lines(profile))


def class_lines(profile: str) -> list[str]:
    """The classifier's correlation read class by class (``05_label_shifts``): whether its heads
    act alike in both domains once a label's gain is not netted against another's loss; none for
    a run from before the table existed."""
    from ...experiments.cross_domain import ALIKE_LEVEL, class_by_class
    from ...store.results import saved_table

    shifts = saved_table(profile, "05_label_shifts")
    if shifts is None:
        return []
    table = class_by_class(shifts).sort_values("training_seed")
    flipped = table[(table["accuracy r"] < 0) & (table["accuracy p"] < 0.01)]
    line = (
        f"**The classifier, class by class:** across domains its heads' recall changes correlate one label at a "
        f"time, each r over the {words(sorted({int(h) for h in table['heads']}))} heads: "
        f"{'; '.join(_class_rs(table))}; their accuracy changes correlate r = "
        f"{words([r_text(r) for r in table['accuracy r']])}. Masking a head mostly moves predictions between "
        f"labels {words(list(table['traded labels']))}, one label's recall rising as the other's falls (r = "
        f"{words([r_text(r) for r in table['trade r (in domain)']])} in domain), so a head's accuracy change is the "
        "small net of that trade."
    )
    explained = flipped[flipped["classes alike"].astype(bool)]
    if len(explained):
        line += (
            f" For seed{'s' * (len(explained) > 1)} {words([str(int(s)) for s in explained['training_seed']])} the "
            "net takes opposite signs in the two domains, and the accuracy correlation turns significantly negative "
            f"while every class's own r is positive (p < {ALIKE_LEVEL} each): a property of where this model's "
            "decisions sit between two labels on each set, not of heads that matter in one domain and not in the "
            "other."
        )
    unexplained = flipped.drop(explained.index)
    if len(unexplained):
        line += (
            f" For seed{'s' * (len(unexplained) > 1)} {words([str(int(s)) for s in unexplained['training_seed']])} "
            "the accuracy correlation is significantly negative and the classes do not move alike either (not every "
            f"class's own r is positive with p < {ALIKE_LEVEL}): this run does not explain it."
        )
    return [line]


def _class_rs(table) -> list[str]:
    """Per seed, each moving label's r across domains: ``seed 0: label 0 0.95, label 1 0.93``."""
    out = []
    for row in table.to_dict("records"):
        labels = [k.removeprefix("class r (").removesuffix(")") for k in row if k.startswith("class r (")]
        shown = [f"label {x} {r_text(row[f'class r ({x})'])}" for x in labels if not pd.isna(row[f"class r ({x})"])]
        out.append(f"seed {int(row['training_seed'])}: {', '.join(shown) or 'no label moving in both domains'}")
    return out
