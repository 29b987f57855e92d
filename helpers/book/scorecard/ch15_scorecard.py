"""Chapter 15's "What this run shows" paragraph: the scorecard's verdicts in words."""

from __future__ import annotations

import pandas as pd

from ..verdicts.text import words


def findings(card: pd.DataFrame) -> str:
    """The scorecard's tallies on both measures, and the claims where they disagree."""
    from ..verdicts.engine import NOT_MEASURED
    from .card import disagreements, verdict_counts

    def tally(column: str) -> str:
        counts = {v: n for v, n in verdict_counts(card, column).items() if n}
        return words([f"{n} {v}" for v, n in counts.items()])

    measured = int((card["likelihood verdict"] != NOT_MEASURED).sum())
    text = (
        f"On the paper's metric, {tally('verdict')} of the {len(card)} claims. On the likelihood, measured for "
        f"{measured} of them: {tally('likelihood verdict')}."
    )
    split = disagreements(card)
    if split.empty:
        return text + " Where both were measured, the two scores give the same verdict on every claim."
    items = [
        f"* *{c}*: {v} on the paper's metric, {lv} on the likelihood."
        for c, v, lv in zip(split["claim"], split["verdict"], split["likelihood verdict"])
    ]
    return text + f" The two scores disagree on {len(items)}:\n\n" + "\n".join(items)
