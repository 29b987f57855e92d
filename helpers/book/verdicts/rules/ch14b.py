"""Chapter 14b's claims, beyond the paper, as llama.cpp serves SmolLM2: a ``q8_0`` KV cache costs
under 1% perplexity; at equal memory, quantizing beats removing KV groups (on the total bytes,
and on the cache's bytes as chapter 14 ranks them); rotating before a ``q4_0`` cache lowers its
cost; keys are more sensitive to quantization than values. The rules read ``14b_quality``,
``14b_pairs`` and ``14b_contrasts`` (``experiments/served_memory.py``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...experiments.served_memory import LEVEL, ROTATION
from ..engine import CANNOT_TELL, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, Results, present

CHAPTER = "14b_served_at_equal_memory"
Q8_MARGIN = 0.01  # "under 1% perplexity": the whole interval of the change below +1%
AXES = {"total": "weights and cache", "cache": "the cache alone"}


def _change(row: pd.Series) -> str:
    return f"{row['perplexity change']:+.2%} [{row['change low']:+.2%}, {row['change high']:+.2%}]"


def q8_cache_cheap(r: Results) -> tuple[str, str]:
    """Non-inferiority: the q8_0 cache's perplexity change from the reference, its interval at
    ``LEVEL`` wholly below ``q8_0_margin`` for reproduced, wholly above it for not reproduced."""
    margin = r.params.get("q8_0_margin", Q8_MARGIN)
    quality = r["14b_quality"].set_index("setup")
    row = present(quality.loc[quality.index == "q8_0 cache"], "14b_quality: q8_0 cache").iloc[0]
    text = f"perplexity {_change(row)}, KL {row['KL']:.5f} nats per token (margin {margin:.0%})"
    if row["change high"] < margin:
        return text, REPRODUCED
    return text, NOT_REPRODUCED if row["change low"] > margin else CANNOT_TELL


def _pairs_text(pairs: pd.DataFrame, axis: str) -> str:
    """How many pairs each side wins (and how many distinct comparisons they are: quality is read
    once, so pairs at two context sizes can repeat one), and the removal's perplexity against its
    partner's over the pairs, the effect's size (details: the chapter's pair table)."""
    q, rem = int(pairs["quantizing wins"].sum()), int(pairs["removal wins"].sum())
    distinct = len(pairs.drop_duplicates(["removal", "partner"]))
    read = pairs.dropna(subset=["gap"]) if "gap" in pairs else pairs.iloc[:0]
    ratios = np.exp(-read["gap"].to_numpy(dtype=float))
    size = f"; the removal's perplexity {ratios.min():.2f}x to {ratios.max():.2f}x its partner's" if len(read) else ""
    return f"on {AXES[axis]}, quantizing wins {q} of {len(pairs)} pairs ({distinct} distinct) and removal {rem}{size}"


def pairs_verdict(pairs: pd.DataFrame) -> str:
    """Quantizing wins every pair: reproduced; removal wins every pair: not reproduced; removal
    wins some and quantizing none: not reproduced; quantizing wins some and the rest are
    undecided or removal's: partly; nothing decided: cannot tell."""
    q, rem, n = int(pairs["quantizing wins"].sum()), int(pairs["removal wins"].sum()), len(pairs)
    if n and q == n:
        return REPRODUCED
    if rem and not q:
        return NOT_REPRODUCED
    return PARTLY if q else CANNOT_TELL


def _pairs(r: Results, axis: str) -> tuple[str, str]:
    table = r["14b_pairs"]
    pairs = present(table[table["axis"] == axis], f"14b_pairs: {axis}")
    return _pairs_text(pairs, axis), pairs_verdict(pairs)


def quantizing_beats_removal(r: Results) -> tuple[str, str]:
    """Each removal against the quantize-only setup holding the most bytes (weights and cache)
    within the removal's, at each context size (``pairs_verdict``)."""
    return _pairs(r, "total")


def ranking_holds(r: Results) -> tuple[str, str]:
    """Chapter 14's ranking in llama.cpp: each removal that quantizes nothing against the
    cache-only quantization holding the most cache bytes within its (``pairs_verdict``)."""
    return _pairs(r, "cache")


def _contrast(r: Results, name: str, what: str) -> tuple[str, str]:
    table = r["14b_contrasts"].set_index("contrast")
    row = present(table.loc[table.index == name], f"14b_contrasts: {name}").iloc[0]
    if pd.isna(row.get("gap", math.nan)):
        return f"llama.cpp refused {row['a']} or {row['b']} (the chapter lists its reason)", CANNOT_TELL
    text = (
        f"{row['a']} {row['a change']:+.2%} against {row['b']} {row['b change']:+.2%} perplexity; {what} "
        f"{row['gap']:+.4f} [{row['low']:+.4f}, {row['high']:+.4f}] nats per token"
    )
    if row["low"] > 0:
        return text, REPRODUCED
    return text, NOT_REPRODUCED if row["high"] < 0 else CANNOT_TELL


def rotation_helps(r: Results) -> tuple[str, str]:
    """The unrotated q4_0 cache's nll less the rotated one's: its interval above 0 for
    reproduced, below 0 for not reproduced; cannot tell where llama.cpp's log says it did not
    rotate the rotated setup's keys (a head size it does not rotate), or rotated the other's."""
    memory = r["14b_memory"].drop_duplicates("setup").set_index("setup")
    rotated, plain = ROTATION
    if rotated in memory.index and plain in memory.index:
        if not memory.loc[rotated, "K rotated"] or memory.loc[plain, "K rotated"]:
            return (
                f"llama.cpp's log says it rotated {'neither' if not memory.loc[rotated, 'K rotated'] else 'both'}",
                CANNOT_TELL,
            )
    return _contrast(r, "rotation", "rotation saves")


def keys_more_sensitive(r: Results) -> tuple[str, str]:
    """q4_0 keys with q8_0 values against q8_0 keys with q4_0 values (the same bytes): the nll
    gap's interval above 0 (coarse keys cost more) for reproduced, below 0 for not reproduced."""
    return _contrast(r, "keys against values", "coarse keys cost")


def sample(r: Results) -> str:
    quality = r["14b_quality"]
    texts = int(quality["texts"].dropna().iloc[0])
    return f"{texts} texts (Bible chapters), each the bootstrap's unit; intervals at {LEVEL:.0%}"


CLAIMS = [
    Claim(
        "served_q8_cache_cheap",
        "Beyond the paper, served in llama.cpp",
        "A q8_0 KV cache costs under 1% perplexity",
        "+0.07% perplexity for a q8_0 K and V cache on an 8B model (llama.cpp's pull request adding quantized V "
        "caches with flash attention)",
        f"reproduced: the {LEVEL:.0%} interval of the perplexity change wholly below +{Q8_MARGIN:.0%} "
        "(`q8_0_margin`); not reproduced: wholly above it; cannot tell: it holds the margin",
        CHAPTER,
        q8_cache_cheap,
        parameters={"q8_0_margin": Q8_MARGIN},
        measured_on="perplexity in llama.cpp",
        sample=sample,
    ),
    Claim(
        "served_quantizing_beats_removal",
        "Beyond the paper, served in llama.cpp",
        "At equal memory (weights and cache), quantizing beats removing KV groups",
        "no published comparison on one axis; KV-cache methods report memory against their own baselines",
        "each removal against the quantize-only setup with the most bytes within its own (chosen from the "
        "predicted bytes before any score is read; among equals, llama.cpp's default, rotation on), at each context "
        f"size: reproduced: quantizing wins every pair (the gap's {LEVEL:.0%} interval below 0); not reproduced: "
        "removal wins pairs (it beats every quantize-only setup within its bytes, Bonferroni among them: a stricter "
        "bar than quantizing's) and quantizing none; partly: quantizing wins some; cannot tell: none decided",
        CHAPTER,
        quantizing_beats_removal,
        measured_on="perplexity and bytes in llama.cpp",
        sample=sample,
    ),
    Claim(
        "served_ranking_holds",
        "Beyond the paper, served in llama.cpp",
        "Chapter 14's ranking holds in llama.cpp: at equal cache bytes, quantizing the cache beats removing KV groups",
        "chapter 14 (transformers' caches): quantizing the cache costs less perplexity than removing KV groups",
        "as the claim above, on the cache's bytes alone, each removal that quantizes nothing against the cache-only "
        "quantization with the most cache bytes within its own",
        CHAPTER,
        ranking_holds,
        measured_on="perplexity and KV bytes in llama.cpp",
        sample=sample,
    ),
    Claim(
        "served_rotation_helps",
        "Beyond the paper, served in llama.cpp",
        "Rotating queries and keys before a q4_0 cache lowers its cost",
        "+11% perplexity without rotation, +0.9% with, for a q4_0 cache on a 30B model (llama.cpp's pull request "
        "that rotates activations)",
        f"reproduced: the unrotated q4_0 cache's nll less the rotated one's, its {LEVEL:.0%} interval above 0; "
        "not reproduced: below 0; cannot tell: it holds 0",
        CHAPTER,
        rotation_helps,
        measured_on="perplexity in llama.cpp",
        sample=sample,
    ),
    Claim(
        "served_keys_more_sensitive",
        "Beyond the paper, served in llama.cpp",
        "Keys are more sensitive to quantization than values",
        "keys carry outliers per channel, values do not (KIVI); `-ctk q8_0 -ctv q4_0` is the setting users try",
        f"reproduced: q4_0 keys with q8_0 values cost more than q8_0 keys with q4_0 values (the same bytes), the "
        f"nll gap's {LEVEL:.0%} interval above 0; not reproduced: below 0; cannot tell: it holds 0, or llama.cpp "
        "refuses one of them",
        CHAPTER,
        keys_more_sensitive,
        measured_on="perplexity in llama.cpp",
        sample=sample,
    ),
]
