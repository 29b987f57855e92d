"""Chapter 03's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

import math

from ....heads.significance import chance_flag_rate
from ..engine import ours
from .text import (
    MEASURES,
    beyond_chance,
    rows_by_model,
    heads_per_layer_line,
    paper_model,
    r_text,
    read,
    split_half_r,
    words,
)


def findings(profile: str, alpha: float) -> str:
    """Chapter 03's findings: each model's heads per layer beside the paper's; per model, measure
    and seed, the heads significant alone against chance, the gains among them, and the split-half r
    of the one-head effects."""
    first = ours(read(profile, "03_one_head_counts"))
    lines = [
        heads_per_layer_line(
            [
                (name, int(part["heads"].iloc[0] // part["layers"].iloc[0]), paper_model(part["kind"]))
                for name, part in rows_by_model(first)
            ]
        )
    ]
    for suffix, measure in MEASURES:
        counts = ours(read(profile, f"03_one_head_counts{suffix}"))
        effects = {track: read(profile, f"03_one_head_{track}{suffix}") for track in ("classifier", "translation")}
        for name, part in rows_by_model(counts):
            per_seed = part.groupby("training_seed", sort=True)
            heads = int(per_seed["heads"].sum().iloc[0])
            sig = {int(s): int(p["significant"].sum()) for s, p in per_seed}
            up = {int(s): int(p["significant_up"].sum()) for s, p in per_seed}
            where = {int(s): [k for k, n in zip(p["kind"], p["significant"]) if n] for s, p in per_seed}
            half = split_half_r(effects["classifier" if set(part["kind"]) == {"self"} else "translation"])
            chance = chance_flag_rate(alpha) * heads
            seeds = sorted(sig)
            above = [s for s in seeds if beyond_chance(sig[s], heads, alpha)]
            text = (
                f"**{name}, {measure}:** {words([str(sig[s]) for s in seeds])} of {heads} heads change the "
                f"score significantly when masked alone (training seed{'s' if len(seeds) > 1 else ''} "
                f"{words([str(s) for s in seeds])}), against {chance:.1f} expected by chance at p < {alpha} "
                f"(2·alpha of the heads: the test flags a change in either direction)"
            )
            kinds = sorted({k for s in seeds for k in where[s]})
            if len(kinds) > 1 or (kinds and kinds != ["self"]):
                text += f" (in {words(kinds)})"
            text += f" ({words([f'{sig[s] / heads:.0%}' for s in seeds])} of the heads; the paper: 8 of 96)"
            if not above:
                text += (
                    "; on no seed more than chance alone would flag (binomial test, p < 0.01, taking the heads' "
                    "tests as independent): on this measure the one-head effects are not seen"
                )
            elif len(above) < len(seeds):
                text += (
                    f"; only on seed{'s' if len(above) > 1 else ''} {words(above)} more than chance alone would flag "
                    "(binomial test, p < 0.01, taking the heads' tests as independent)"
                )
            else:
                text += (
                    "; on every seed more than chance alone would flag (binomial test, p < 0.01, taking the heads' "
                    "tests as independent; they share examples, so this p is optimistic)"
                )
            gains = [s for s in seeds if up[s] > 0]
            text += (
                ". Significant gains from removing a head (the paper: 4 of its 8): "
                + ("none" if not gains else "; ".join(f"{up[s]} on seed {s}" for s in gains))
                + f", against {chance_flag_rate(alpha, one_direction=True) * heads:.1f} expected by chance in that "
                "direction."
            )
            if "negligible" in part:
                text += " " + _equivalence_text(part, per_seed, seeds, likelihood=bool(suffix))
            text += (
                f" The split-half r of the effects (even against odd examples): "
                f"{words([r_text(half[s]) for s in seeds])}"
            )
            weak = [s for s in seeds if not half[s] >= 0.5]
            text += (
                "; the halves agree: the effects replicate across examples."
                if not weak
                else f"; below 0.5 on seed{'s' if len(weak) > 1 else ''} {words(weak)}: there a head's effect on "
                "half of the examples barely predicts it on the other half, and a count near chance is noise."
            )
            lines.append(text)
    return "\n\n".join(lines)


def _equivalence_text(part, per_seed, seeds: list[int], likelihood: bool) -> str:
    """The heads of each equivalence class against the chapter's margin, seed by seed."""
    delta = float(part["margin"].iloc[0])
    margin = (
        f"{math.expm1(delta):.0%} of perplexity ({delta:.4f} nats)"
        if likelihood
        else f"{delta * 100:.2g} accuracy points"
        if set(part["kind"]) == {"self"}
        else f"{delta:.2g} BLEU"
    )
    count = {
        c: words([str(int(per_seed[c].sum().loc[s])) for s in seeds])
        for c in ("negligible", "harmful", "helpful", "undetermined", "unplaced")
    }
    return (
        f"Against a margin of ±{margin}: {count['negligible']} heads shown negligible, {count['harmful']} harmful, "
        f"{count['helpful']} helpful and {count['undetermined']} undetermined; {count['unplaced']} are placed by "
        "neither test (not significant, yet not shown negligible)."
    )
