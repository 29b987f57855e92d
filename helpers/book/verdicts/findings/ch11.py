"""Chapter 11's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

import math

from ....heads.significance import MIN_UNITS, chance_flag_rate
from ...store.columns import MIN_BAND_ORDERS
from .text import read, words


def small_sample(sets) -> str:
    """A warning where the tests below run on fewer verses than the book's declared minimum."""
    n = int(min(sets.loc["select", "verses"], sets.loc["report", "verses"]))
    if n >= MIN_UNITS:
        return ""
    return (
        f" **The tests below resample only {n} verses, under the book's minimum of {MIN_UNITS}** (this profile "
        "lowers `min_units`): over so few, a bootstrap flags far more heads with no effect than its alpha says "
        "(about a fifth over 4 verses), so read the counts as an exercise, not a finding."
    )


def null_rate_line(profile: str) -> list[str]:
    """Why the grid is tested at its calibrated level (``11_grid_null_rate``, ``calibrated_grid``):
    the share of no-effect heads the bootstrap flags at its nominal level and at the calibrated
    one, on fresh null draws; none for a run from before the table existed."""
    from ...store.results import saved_table

    rates = saved_table(profile, "11_grid_null_rate")
    if rates is None or "level" not in rates:
        return []
    grid = read(profile, "11_one_head_grid")
    nominal, calibrated = (rates.set_index("level").loc[k] for k in ("nominal", "calibrated"))
    loose = int(grid["significant at nominal alpha"].sum())
    return [
        f"**The level these verses allow.** With every head's per-verse changes centred at no effect and "
        f"{int(nominal['verses'])} verses drawn from them ({int(nominal['tests']):,} tests), the bootstrap at its "
        f"nominal p < {nominal['alpha']:g} flags {nominal['flagged with no effect']:.1%} of the heads, against the "
        f"{nominal['nominal']:.0%} it promises"
        + (
            ": over so few, skewed verses it is too liberal"
            if nominal["flagged with no effect"] > nominal["nominal"]
            else ""
        )
        + f". The grid is therefore tested at {level_text(calibrated['alpha'])}, the level fitted on one set of such "
        f"draws, which flags {calibrated['flagged with no effect']:.1%} on a fresh set. At the nominal level {loose} "
        f"heads would have been called significant; at the calibrated level {int(grid['significant'].sum())} are."
    ]


def level_text(level: float) -> str:
    """The calibrated level in words; at 0, no p-value is small enough (chance's share of the
    no-effect heads already gets p = 0, as over a handful of verses)."""
    return f"p < {level:.3g}" if level > 0 else "no level at all (no head can be called significant here)"


def findings(profile: str, alpha: float, speed_share: float = 0.5) -> str:
    """Chapter 11's findings (one language model, one draw of verses): the one-head grid against
    chance, the layers that keep their perplexity with one head, the prunable shares and the
    speed-up against the FLOP prediction, with ``speed_share`` of the query heads removed."""
    from ....sweeps.throughput import speed_gains

    sets = read(profile, "11_sets").set_index("set")
    grid = read(profile, "11_one_head_grid")
    keep = read(profile, "11_keep_one_head")
    shares = read(profile, "11_prunable_shares").set_index(["unit", "order"])
    gains = speed_gains(read(profile, "11_speed")).set_index("batch_size")
    worse = grid[grid["significant"] & (grid["change_pct"] > 0)]
    better = grid[grid["significant"] & (grid["change_pct"] < 0)]
    top = grid.loc[grid["change_pct"].idxmax()]
    kept = keep[~keep["significant"]]
    counts = read(profile, "11_one_head_counts").iloc[0]
    at_level = f" ({level_text(grid['level'].iloc[0])}, the calibrated level below)" if "level" in grid else ""
    lines = [
        f"The model's perplexity on the verses is {sets.loc['select', 'perplexity']:.1f} (select set, "
        f"{int(sets.loc['select', 'verses'])} verses) and {sets.loc['report', 'perplexity']:.1f} (report set)."
        + small_sample(sets),
        f"**One head masked:** {len(worse)} of {len(grid)} query heads raise the perplexity significantly and "
        f"{len(better)} lower it significantly{at_level}, against "
        f"{chance_flag_rate(alpha, one_direction=True) * len(grid):.1f} "
        f"expected by chance in each direction ({chance_flag_rate(alpha) * len(grid):.1f} in all); "
        f"{int((grid['change_pct'].abs() < 1).sum())} change it by less than 1%. The largest rise is "
        f"{top['change_pct']:+.1f}% (layer {int(top['layer'])}, head {int(top['head'])}); the significant heads are "
        "in "
        f"{grid.loc[grid['significant'], 'layer'].nunique()} of the {grid['layer'].nunique()} layers."
        + (
            f" Against a margin of ±{math.expm1(counts['margin (nats)']):.0%} of perplexity, "
            f"{int(counts['negligible'])} "
            f"heads are shown negligible, {int(counts['harmful'])} harmful, {int(counts['helpful'])} helpful and "
            f"{int(counts['undetermined'])} undetermined; {int(counts['unplaced'])} are placed by neither test."
            if "negligible" in counts
            else ""
        ),
        *null_rate_line(profile),
        f"**One head kept:** {len(kept)} of {len(keep)} layers show no significant loss with a single query head; "
        f"the median layer changes the perplexity by {keep['change_pct'].median():+.0f}% and the worst by "
        f"{keep['change_pct'].max():+.0f}% (layer {int(keep.loc[keep['change_pct'].idxmax(), 'layer'])}).",
    ]
    for unit in ("query heads", "KV groups"):
        imp = shares.loc[(unit, "importance")]
        rand = shares.loc[unit].drop("importance")
        lines.append(
            f"**Pruning {unit} by importance:** {imp['prunable within 1%']:.0%} can go with the perplexity within "
            f"1% of the unpruned model's and {imp['prunable within 10%']:.0%} within 10%; at half pruned the "
            f"perplexity is {imp['perplexity at 50%']:.1f}, against "
            + words([f"{v:.1f}" for v in rand["perplexity at 50%"]])
            + f" for {len(rand)} random order{'s' if len(rand) > 1 else ''}"
            + (" (too few for a band)." if len(rand) < MIN_BAND_ORDERS else ".")
        )
    big, small = gains.index.max(), gains.index.min()
    lines.append(
        f"**Speed:** with the least important {speed_share:.0%} of the query heads removed, the model is "
        f"{gains.loc[big, 'pruned']:+.1%} faster at batch {big} ({gains.loc[big, 'share_of_predicted']:.0%} of the "
        f"{gains.loc[big, 'predicted']:+.1%} its FLOPs predict) and {gains.loc[small, 'pruned']:+.1%} at batch "
        f"{small}; the gated model runs {gains.loc[small, 'gated']:+.1%} and {gains.loc[big, 'gated']:+.1%} "
        "against the original (medians of the timed passes)."
    )
    return "\n\n".join(lines)
