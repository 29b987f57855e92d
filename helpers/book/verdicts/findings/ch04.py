"""Chapter 04's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

from ..engine import ours
from .text import MEASURES, heads_per_layer_line, paper_model, read, words


def findings(profile: str) -> str:
    """Chapter 04's findings: each model's heads per layer beside the paper's; per model, protocol,
    measure and seed, the layers that keep their score with one head, and the worst layer."""
    first = ours(read(profile, "04_keep_one_counts"))
    lines = [
        heads_per_layer_line(
            [
                (str(name), int(part["heads_per_layer"].iloc[0]), paper_model(part["kind"]))
                for name, part in first.groupby("source", sort=False)
            ]
        )
    ]
    for suffix, measure in MEASURES:
        counts = ours(read(profile, f"04_keep_one_counts{suffix}"))
        for (source, protocol), part in counts.groupby(["source", "protocol"], sort=False):
            name = str(source)
            kept, worst, beyond = [], [], []
            for seed, rows in part.groupby("training_seed", sort=True):
                layers, down = int(rows["layers"].sum()), int(rows["significant_down"].sum())
                kept.append(f"{layers - down} of {layers}")
                if "harmful" in rows and rows["harmful"].notna().all():
                    beyond.append(str(int(rows["harmful"].sum())))
                w = rows.loc[rows["worst_delta"].idxmin()]
                worst.append(
                    f"{w['kind']} layer {int(w['worst_layer'])} ({w['worst_delta']:+.2f} {w['unit']}, seed "
                    f"{int(seed)})"
                )
            kinds = {w.split(" layer")[0] for w in worst}
            margin = (
                f"; {words(beyond)} lose more than the margin δ (their interval wholly below "
                f"-{part['margin'].iloc[0]:.3g})"
                if beyond
                else ""
            )
            lines.append(
                f"**{name}, {protocol}, {measure}:** {words(kept)} layers show no significant loss with a single "
                f"head (seed by seed){margin}; the worst layer is {words(worst)}"
                + (f" - always {kinds.pop()}." if len(kinds) == 1 else ".")
            )
    return "\n\n".join(lines)
