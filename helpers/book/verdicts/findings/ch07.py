"""Chapter 07's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

from .text import read, words


def findings(profile: str) -> str:
    """Chapter 07's findings: the measured speed-ups (ratios of median rates) at each batch size
    against the FLOP prediction and the paper's, the gated model against the timing noise, and
    the precision table's rows."""
    from ....sweeps.throughput import speed_gains
    from ...paper.values import TABLE4_SPEEDUP

    speed = read(profile, "07_speed")
    gains = speed_gains(speed).set_index("batch_size")
    sizes = list(gains.index)
    small, large = sizes[0], sizes[-1]
    at_large = speed[speed["batch_size"] == large].set_index("variant")
    noise = max(at_large.loc[v, "iqr"] / at_large.loc[v, "median"] for v in ("original", "gated"))
    g = gains.loc[large]
    text = (
        f"On {speed['device'].iloc[0]}, removing the heads made the classifier {g['pruned']:+.1%} faster at batch "
        f"{large} (median of the timed passes), against {g['predicted']:+.1%} predicted by the removed FLOPs "
        f"({g['share_of_predicted']:.0%} of the prediction realised) and the paper's {TABLE4_SPEEDUP[64]:+.1%} at 64 "
        f"on a GPU. At batch {small} it gained {gains.loc[small, 'pruned']:+.1%} (the paper: "
        f"{TABLE4_SPEEDUP[1]:+.1%} at batch 1), "
        + (
            "less than at the largest batch (point estimates). "
            if gains.loc[small, "pruned"] < g["pruned"]
            else "no less than at the largest batch. "
        )
        + f"The gated model ran {g['gated']:+.1%} against the original at batch {large}, with a timing noise "
        f"(interquartile range over median) of {noise:.1%}: "
        + (
            "masking saves nothing beyond the noise, as masking should."
            if g["gated"] <= noise
            else "faster than the noise alone explains, which the timing should be checked for."
        )
    )
    try:
        precision = speed_gains(read(profile, "07_precision"))
    except FileNotFoundError:
        return text
    rows = [
        f"{r.dtype} {r.compile_mode} at batch {r.batch_size}: {r.pruned:+.1%} (predicted {r.predicted:+.1%})"
        for r in precision.itertuples()
    ]
    return text + " In the precision table, the pruned model's speed-up was " + words(rows) + "."
