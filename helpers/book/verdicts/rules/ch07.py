"""Chapter 07's claims (§4.3, Table 4): removing half the heads speeds inference up at large
batches, hardly at batch 1. The rules read ``07_speed``."""

from __future__ import annotations

import pandas as pd

from ...paper import values as paper_values
from .. import samples
from ..engine import Claim, Results, three_way

CHAPTER = "07_pruning_speed"


def speedups(r: Results) -> pd.Series:
    speed = r["07_speed"].pivot(index="batch_size", columns="variant", values="median")
    return speed["pruned"] / speed["original"] - 1


def speedup_large(r: Results) -> tuple[str, str]:
    gains = speedups(r)
    paper, gain = paper_values.TABLE4_SPEEDUP[64], gains.iloc[-1]
    return (
        f"{gain:+.1%} at batch {gains.index[-1]} ({r['07_speed']['device'].iloc[0]})",
        three_way(abs(gain - paper) <= paper / 2, gain > 0),
    )


def speedup_small(r: Results) -> tuple[str, str]:
    gains = speedups(r)
    return (
        f"{gains.iloc[0]:+.1%} at batch {gains.index[0]}, {gains.iloc[-1]:+.1%} at {gains.index[-1]}",
        three_way(
            gains.iloc[0] < gains.iloc[-1] and gains.iloc[0] < paper_values.TABLE4_SPEEDUP[64] / 2,
            gains.iloc[0] < gains.iloc[-1],
        ),
    )


def speed_sample(r: Results) -> str:
    return samples.timing(r["07_speed"])


CLAIMS = [
    Claim(
        "speedup_large",
        "§4.3, Table 4",
        "Removing half the heads speeds inference up at large batches",
        f"{paper_values.TABLE4_SPEEDUP[64]:+.1%} at batch 64 (GTX 1080Ti)",
        "reproduced: within half of the paper's gain either way; partly: faster",
        CHAPTER,
        speedup_large,
        sample=speed_sample,
    ),
    Claim(
        "speedup_small",
        "§4.3, Table 4",
        "At batch size 1 there is almost no gain",
        f"{paper_values.TABLE4_SPEEDUP[1]:+.1%} at batch 1",
        "reproduced: batch 1 gains less than the largest "
        "batch and under half the paper's large-batch gain; partly: less than the largest batch",
        CHAPTER,
        speedup_small,
        sample=speed_sample,
    ),
]
