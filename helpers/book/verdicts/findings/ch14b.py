"""Chapter 14b's "What this run shows" paragraphs: SmolLM2 served by llama.cpp at equal memory
(see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

from ...experiments.served_memory import REFERENCE
from .text import read, words


def _mib(x: float) -> str:
    return f"{x:,.0f} MiB" if x >= 10 else f"{x:.2f} MiB"


def _threads(n: int) -> str:
    return f"{n} thread{'s' * (n != 1)}"


def memory_lines(profile: str) -> list[str]:
    """Whether llama.cpp allocates what the arithmetic says, and the reference's bytes."""
    memory = read(profile, "14b_memory")
    weights = int((memory["weight bytes"] == memory["weight bytes, predicted"]).sum())
    gap = (memory["cache MiB"] - memory["cache bytes, predicted"] / 2**20).abs().max()
    ref = memory[memory["setup"] == REFERENCE].sort_values("cells")
    caches = words([f"{_mib(r['cache MiB'])} at {int(r['cells']):,} cells" for _, r in ref.iterrows()])
    return [
        f"**Memory.** llama.cpp's weights equal the arithmetic to the byte in {weights} of {len(memory)} rows. "
        f"Its cache is at most {gap:.3f} MiB from the arithmetic (its log rounds to 0.01 MiB). "
        f"The reference holds {_mib(ref['weight bytes'].iloc[0] / 2**20)} of weights and {caches} of cache."
    ]


def quality_lines(profile: str) -> list[str]:
    """Each setup's perplexity change and KL, cheapest first; refusals with their reason."""
    quality = read(profile, "14b_quality")
    read_ = quality[quality["refused"].fillna("") == ""].sort_values("perplexity change")
    ref = read_[read_["setup"] == REFERENCE].iloc[0]
    parts = [
        f"{r['setup']} {r['perplexity change']:+.2%} [{r['change low']:+.2%}, {r['change high']:+.2%}], "
        f"KL {r['KL']:.4f}"
        for _, r in read_.iterrows()
        if r["setup"] != REFERENCE
    ]
    lines = [
        f"**Quality.** The reference's perplexity is {ref['perplexity']:.2f} on {int(ref['texts'])} texts. "
        "Each setup's change from it, with its interval, and its KL in nats per token: " + "; ".join(parts) + "."
    ]
    refused = quality[quality["refused"].fillna("") != ""]
    lines += [f"llama.cpp refused {r['setup']}: {r['refused']}" for _, r in refused.iterrows()]
    return lines


def frontier_lines(profile: str) -> list[str]:
    """The unbeaten setups per context size, and whether a removal is among them."""
    table = read(profile, "14b_frontier")
    lines = []
    for cells, at in table.groupby("cells"):
        best = at[at["unbeaten"].astype(bool)].sort_values("total MiB")
        removal = best["family"].eq("removal").any()
        named = words(
            [f"{r['setup']} ({_mib(r['total MiB'])}, {r['perplexity change']:+.2%})" for _, r in best.iterrows()]
        )
        lines.append(
            f"**Unbeaten at {int(cells):,} cells** (by point estimates): {named}. "
            + (
                "A setup with KV groups removed is among them."
                if removal
                else "No setup with KV groups removed is among them."
            )
        )
    return lines


def speed_lines(profile: str) -> list[str]:
    """Generation and prompt speed against the reference, at the most threads timed."""
    speed = read(profile, "14b_speed_summary")
    at = speed[speed["threads"] == speed["threads"].max()].sort_values("generated x reference")
    slow, fast = at.iloc[0], at.iloc[-1]
    return [
        f"**Speed at {_threads(int(at['threads'].iloc[0]))}.** "
        f"Generation runs from {slow['generated x reference']:.2f}x the reference ({slow['setup']}) "
        f"to {fast['generated x reference']:.2f}x ({fast['setup']}). "
        f"Prompts run from {at['prompt x reference'].min():.2f}x to {at['prompt x reference'].max():.2f}x."
    ]


def rotation_lines(profile: str) -> list[str]:
    """Whether llama.cpp rotated each quantized cache, as its log says."""
    memory = read(profile, "14b_memory").drop_duplicates("setup")
    quantized = memory[(memory["K type"] != "f16") | (memory["V type"] != "f16")]
    both = quantized["K rotated"].astype(bool) & quantized["V rotated"].astype(bool)
    on = quantized[both]["setup"].tolist()
    off = quantized[~both]["setup"].tolist()
    return [
        "**Rotation.** llama.cpp's log says it rotates keys and values before "
        + (words(on) if on else "no quantized cache")
        + (f", and not before {words(off)}" if off else "")
        + "."
    ]


def findings(profile: str) -> str:
    parts = memory_lines(profile) + quality_lines(profile) + rotation_lines(profile)
    return "\n\n".join(parts + frontier_lines(profile) + speed_lines(profile))
