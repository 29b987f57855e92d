"""Chapter 14's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

from ...experiments.memory_budget import (
    COMBINED,
    EVICTED,
    QUANTIZED,
    QUANTIZING,
    REMOVED,
    UNPRUNED,
    WINDOWED,
)
from .text import read, words


def _pct(x: float) -> str:
    return f"{x:.0%}"


def setting_lines(profile: str) -> list[str]:
    points, checks = read(profile, "14_points"), read(profile, "14_checks")
    base = points[points["method"] == UNPRUNED].iloc[0]
    exact = int((checks["bytes, measured"] == checks["bytes, predicted"]).sum())
    fast = checks[checks["method"] != EVICTED]  # heavy hitters are scored with their real cache
    quantized = fast["method"].isin(QUANTIZING)  # by method: the plain "16-bit cache" holds no codes
    tolerance = float(fast.loc[~quantized, "largest sequence gap, 16-bit"].max())  # memory_budget.fast_pass_tolerance
    gaps = fast["largest sequence gap, float32"]
    prompt = points["prompt bytes share"]
    return [
        f"**The setting:** {int(base['sequences'])} whole chapters, {int(base['scored tokens']):,} scored tokens; the "
        f"unpruned model's perplexity on them is {base['perplexity']:.2f} and it copies the repeated passage with "
        f"accuracy {base['copying accuracy']:.2f}. Its 16-bit cache holds {base['bytes per token']:,.0f} bytes per "
        f"token. **Checked against the real caches** ({int(fast['sequences'].iloc[0])} chapters read one position "
        f"at a time, {len(checks)} configurations): the bytes measured equal the arithmetic for {exact} of "
        f"{len(checks)}. In 16 bits the two ways of the caches that hold 16-bit values differ by up to "
        f"{tolerance:.4f} nats a chapter (rounding alone): the tolerance. In float32 ({int(gaps.notna().sum())} "
        "configurations: one of each way a fast pass is computed, and every quantized cache) each fast pass is "
        "within it of its real cache: the caches "
        f"that do not quantize to {gaps[~quantized].max():.0e} nats, the quantized ones to "
        f"{gaps[quantized].max():.4f} (a key's last bit, computed in a matrix product of another shape, can cross "
        f"a code's boundary). In 16 bits the quantized caches' two ways differ by up to "
        f"{fast.loc[quantized, 'largest sequence gap, 16-bit'].max():.4f} nats a chapter: their codes follow the "
        "last bit of a key, so a quantized cache's perplexity is known to about that. **While the prompt is "
        "read**, in one pass, every configuration holds its own KV "
        f"heads' 16-bit keys and values for the whole prompt ({prompt.min():.0%} to {prompt.max():.0%} of the "
        "plain cache's bytes); the bytes axis counts what each cache holds from the next position on."
    ]


def budget_lines(profile: str) -> list[str]:
    budgets = read(profile, "14_budgets")
    lines = []
    for row in budgets.to_dict("records"):
        named = (
            f"best {row['best']}"
            if row["clear"]
            else f"no clear best (the gap is within the tolerance of {row['tolerance']:.4f} nats or its interval "
            f"holds 0): lowest {row['best']}"
        )
        lines.append(
            f"**{row['budget']:.0%} of the bytes:** {named} ({row['best setting']}, "
            f"{_pct(row['best share'])} of the bytes, perplexity {row['best perplexity']:.2f}); runner-up "
            f"{row['runner-up']} ({_pct(row['runner-up share'])}, {row['runner-up perplexity']:.2f}); gap "
            f"{row['log-perplexity gap']:+.3f} nats per token [{row['gap low']:+.3f}, {row['gap high']:+.3f}]."
        )
    return lines


def copying_lines(profile: str) -> list[str]:
    points = read(profile, "14_points")
    floor = read(profile, "14_floor")["first-read accuracy"].iloc[0]
    parts = []
    for method in (REMOVED, WINDOWED, QUANTIZED):
        part = points[points["method"] == method].sort_values("bytes share")
        if len(part):
            parts.append(
                f"{method} "
                + ", ".join(f"{r['copying accuracy']:.2f} at {_pct(r['bytes share'])}" for _, r in part.iterrows())
            )
    return [
        f"**Copying the repeated passage** (the model reading it for the first time gets {floor:.2f} right): "
        + "; ".join(parts)
        + "."
    ]


def composition_lines(profile: str) -> list[str]:
    """Whether removing groups and quantizing compose: the combined perplexity ratio against the
    product of the two alone."""
    points = read(profile, "14_points")
    four = points[(points["method"] == QUANTIZED) & points["setting"].str.startswith("4-bit")]
    out = []
    for _, row in points[points["method"] == COMBINED].iterrows():
        kept = row["setting"].split(",")[0]
        alone = points[(points["method"] == REMOVED) & (points["setting"] == kept)]
        if alone.empty or four.empty:
            continue
        product = alone["perplexity ratio"].iloc[0] * four["perplexity ratio"].iloc[0]
        out.append(
            f"{kept} and 4-bit ({_pct(row['bytes share'])} of the bytes): perplexity x{row['perplexity ratio']:.3f} "
            f"[{row['ratio low']:.3f}, {row['ratio high']:.3f}], against x{product:.3f} from the two alone multiplied"
        )
    return [f"**Do they compose?** {words(out)}."] if out else []


def window_lines(profile: str) -> list[str]:
    scores = read(profile, "14_window_groups").sort_values("rank")
    top = [
        f"{int(r['layer'])}.{int(r['group'])} ({r['beyond window']:.2f})" for r in scores.head(5).to_dict("records")
    ]
    return [
        f"**Where windowed heads keep full context:** the groups that read most beyond the window (layer.group, "
        f"attention beyond it) are {words(top)}; the median group puts {scores['beyond window'].median():.2f} of its "
        "attention there."
    ]


def findings(profile: str) -> str:
    return "\n\n".join(
        setting_lines(profile)
        + budget_lines(profile)
        + copying_lines(profile)
        + composition_lines(profile)
        + window_lines(profile)
    )
