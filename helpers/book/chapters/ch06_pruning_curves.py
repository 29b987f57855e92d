"""Chapter 06, pruning curves: the rules that judge its claims and its findings in words.

Chapter 06's claims (§4.2, Figure 3): a share of each model's heads can be pruned with no
noticeable loss, and ranking by importance prunes more than one-head ablation and than random
orders. The rules read ``06_prunable_shares``; where Figure 3's ablation order is in-sample (the
paper's protocol), the comparison of importance with ablation reads the held-out protocol drawn
beside it (``protocol_tables``).

``findings``: chapter 06's "What this run shows" paragraph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..paper import values as paper_values
from ..store.columns import IN_SAMPLE, MIN_BAND_ORDERS, RANDOM_HIGH, RANDOM_LOW
from ..store.results import ChapterTables
from ..verdicts import samples
from ..verdicts.between_seeds import NotTestable, Value, with_error
from ..verdicts.engine import (
    CANNOT_TELL,
    LIKELIHOOD,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    SHARE_TOLERANCE,
    Claim,
    MissingResults,
    Results,
    for_every,
    present,
    three_way,
    within,
)
from ..verdicts.pooling import Pooled, mean_over_seeds, over_interval, with_ranges
from ..verdicts.text import MEASURES, percents, share_interval, words

if TYPE_CHECKING:
    from ..experiments.pruning_runs import PruningRuns

CHAPTER = "06_pruning_curves"
_CURVES = "06_pruning_curves"
_SHARES = "06_prunable_shares"
_BY_MEASURE = (("metric", ""), ("likelihood", LIKELIHOOD))  # the sweeps' measure, its tables' suffix


def protocol_tables(runs: PruningRuns) -> dict[str, pd.DataFrame]:
    """The curves and prunable shares of the protocol Figure 3 does not draw (``runs.beside()``:
    the importance and ablation orders, on both measures), named by that protocol:
    ``06_pruning_curves_<protocol>``, ``06_prunable_shares_<protocol>`` and their likelihood tables
    (``PruningRuns.protocol``: ``held_out`` or ``in_sample``)."""
    other = runs.beside()
    out: dict[str, pd.DataFrame] = {}
    for measure, suffix in _BY_MEASURE:
        curves = other.all_curves(measure=measure)
        out[f"{_CURVES}_{other.protocol}{suffix}"] = curves
        out[f"{_SHARES}_{other.protocol}{suffix}"] = other.summary(curves, measure=measure)
    return out


def save_protocol_tables(runs: PruningRuns, profile: str, drawn: bool) -> dict[str, pd.DataFrame]:
    """``protocol_tables(runs)`` saved under ``results/<profile>/`` where ``drawn``, else none; either
    way every other name of ``protocol_names`` is removed, so that no rule or finding reads a table
    an earlier run saved under another protocol. Returns the tables saved."""
    from ..store.results import remove_tables, save_tables

    tables = protocol_tables(runs) if drawn else {}
    save_tables(profile, tables)
    remove_tables(profile, set(protocol_names()) - set(tables))
    return tables


def protocol_figure(runs: PruningRuns, tables: dict[str, pd.DataFrame], profile: str):
    """Figure 3 of the other protocol's curves (``protocol_tables(runs)``), on the paper's metric;
    None where ``tables`` is empty (the profile does not draw it)."""
    if not tables:
        return None
    other = runs.beside()
    title = f"the {other.protocol.replace('_', '-')} protocol for the ablation order ({profile} profile)"
    return other.figure(tables[f"{_CURVES}_{other.protocol}"], suptitle=title)


def clear_protocol_tables(profile: str) -> list:
    """Remove every table of ``protocol_names`` before this run saves its own: a run that stops
    before ``save_protocol_tables`` leaves none, never an earlier run's beside its new Figure 3."""
    from ..store.results import remove_tables

    return remove_tables(profile, protocol_names())


PROTOCOLS = ("held_out", "in_sample")  # PruningRuns.protocol's values


def protocol_names() -> list[str]:
    """Every name ``protocol_tables`` may save, under either protocol: a run removes those it did
    not save, so that no rule or finding reads a table of an earlier run's protocol."""
    return [
        f"{base}_{protocol}{suffix}"
        for protocol in PROTOCOLS
        for _, suffix in _BY_MEASURE
        for base in (_CURVES, _SHARES)
    ]


def _in_sample(shares: pd.DataFrame) -> bool:
    """Whether the ablation order of ``shares`` was read off the set its curves score (a table
    that does not say counts as in-sample)."""
    on = shares.loc[shares["order"] == "ablation", "selected_on"] if "selected_on" in shares else pd.Series([None])
    return bool(on.isna().any() or (on == IN_SAMPLE).any())


def ablation_shares(r: Results) -> tuple[pd.DataFrame, str]:
    """``(shares, note)``: the prunable shares that compare importance with ablation fairly. The
    chapter's own where its ablation order is held out; else the held-out protocol's drawn beside
    an in-sample Figure 3 (``protocol_tables``), with a note that says so; else the chapter's own
    (in-sample: the rule cannot tell)."""
    shares = r[_SHARES]
    if not _in_sample(shares):
        return shares, ""
    try:
        return r[f"{_SHARES}_held_out"], " (the held-out protocol, drawn beside Figure 3)"
    except MissingResults:
        return shares, ""


def _error(row: pd.Series, se: str) -> float:
    """A share's standard error over the scored examples: the bootstrap's of the share as the
    curve's grid defines it (``se``, a column of ``row``); NaN where undefined (a BLEU of 0 in some
    resample). The grid's own rounding is left out: the claim is about the share on this grid,
    and where every resample lands on one step, that step is what the data say."""
    return float(row[se])


def _seeds(r: Results) -> str:
    return f" ({len(r.seeds)} seeds pooled)" if len(r.seeds) > 1 else ""


def _pct(p: Pooled) -> str:
    return share_interval(p.x, max(p.low, -1.0), min(p.high, 1.0))


def prunable(track: str) -> Callable[[Results], tuple[str, str]]:
    """The importance order's prunable share, pooled over the seeds with its interval (shares lie
    in [0, 1]; widened to hold each seed's bootstrap range: ``pooling.with_ranges``); read over
    the interval: within ``SHARE_TOLERANCE`` of the paper's share is
    reproduced, above 0 partly."""

    def check(r: Results) -> tuple[str, str]:
        table = r[_SHARES]
        rows = present(table[(table["track"] == track) & (table["order"] == "importance")], f"{_SHARES}: {track}")
        pooled = mean_over_seeds(rows["prunable_share"], [_error(row, "share_se") for _, row in rows.iterrows()])
        if {"share_low", "share_high"} <= set(rows):  # a step statistic: the seeds' own ranges too
            pooled = with_ranges(pooled, rows["share_low"].tolist(), rows["share_high"].tolist())
        pooled = Pooled(pooled.x, max(pooled.low, 0.0), min(pooled.high, 1.0), pooled.per_seed)
        paper = paper_values.PRUNABLE_SHARE[track]
        verdict = over_interval(lambda v: three_way(within(v, paper), v > 0), pooled)
        return _pct(pooled) + _seeds(r), verdict

    return check


def _tied_at_an_end(part: pd.DataFrame) -> bool:
    """Importance and ablation both at 0 (the first step already costs too much) or both at 1
    (nothing costs anything) on every seed: no evidence either way."""
    shares = part.pivot_table(index=_seed_index(part), columns="order", values="prunable_share", aggfunc="first")
    return bool(((shares["importance"] == shares["ablation"]) & shares["importance"].isin([0.0, 1.0])).all())


def _seed_index(part: pd.DataFrame):
    return part["training_seed"].fillna(-1) if "training_seed" in part else pd.Series(0, index=part.index)


def importance_beats_ablation(r: Results) -> tuple[str, str]:
    """Compared only on equal footing: an ablation order estimated on the very examples its curve
    scores (in-sample) has an advantage I_h (estimated on the training split) lacks. Per model,
    importance's share less ablation's, pooled over the seeds with its interval (the paired
    bootstrap's error of the difference); "at least as
    well" holds where the whole interval lies above -``SHARE_TOLERANCE`` (the shares' tolerance)
    and fails where it lies below it; for every model (partly: some)."""
    shares, note = ablation_shares(r)
    verdicts, parts = [], []
    for model, part in shares[shares["order"].isin(["importance", "ablation"])].groupby("model"):  # by name
        imp, abl = (
            part[part["order"] == o].set_index(_seed_index(part[part["order"] == o]))
            for o in ("importance", "ablation")
        )
        gap = imp["prunable_share"] - abl["prunable_share"]
        errors = [_error(row, "minus_ablation_se") for _, row in imp.iterrows()]
        pooled = mean_over_seeds(gap.to_numpy(), errors)
        parts.append(
            f"{model}: {imp['prunable_share'].mean():.0%} vs {abl['prunable_share'].mean():.0%}, gap {_pct(pooled)}"
        )
        if _tied_at_an_end(part):
            verdicts.append(CANNOT_TELL)
            continue
        # at least -10 points, as within() reads the tolerance (a one-step gap is -10 whatever its float error)
        verdicts.append(over_interval(lambda v: REPRODUCED if v >= 0 or within(v, 0.0) else NOT_REPRODUCED, pooled))
    text = "; ".join(parts) + _seeds(r) + note
    if _in_sample(shares):
        return text + " (the ablation order in-sample or not recorded: no fair comparison)", CANNOT_TELL
    return text, for_every(verdicts)


def importance_beats_random(r: Results) -> tuple[str, str]:
    """Against the band, not one draw: per model, importance's prunable share less the 95th
    percentile of the random orders' shares, pooled over the seeds with its interval (the share's
    bootstrap error over examples and the percentile's over the orders);
    above 0 over the whole interval is a win, below it over the whole interval a loss; for every
    model (partly: some). A model whose band has too few orders on some seed is undecided."""
    shares = r[_SHARES]
    if RANDOM_HIGH not in set(shares["order"]):
        return "(no band of random orders)", NOT_RUN
    verdicts, parts = [], []
    for model, part in shares.groupby("model"):  # by name
        imp = part[part["order"] == "importance"].set_index(_seed_index(part[part["order"] == "importance"]))
        high = part[part["order"] == RANDOM_HIGH].set_index(_seed_index(part[part["order"] == RANDOM_HIGH]))
        low = part[part["order"] == RANDOM_LOW].set_index(_seed_index(part[part["order"] == RANDOM_LOW]))
        orders = high["random_orders"].reindex(imp.index)
        if not (orders >= MIN_BAND_ORDERS).all():  # fewer orders make no 95th percentile: undecided
            shown = int(orders.min()) if orders.notna().all() else "too few"
            parts.append(f"{model}: {imp['prunable_share'].mean():.0%} ({shown} orders: too few for a band)")
            verdicts.append(CANNOT_TELL)
            continue
        gap = imp["prunable_share"] - high["prunable_share"].reindex(imp.index)
        errors = [float(np.hypot(_error(row, "share_se"), high.loc[seed, "band_se"])) for seed, row in imp.iterrows()]
        pooled = mean_over_seeds(gap.to_numpy(), errors)
        parts.append(
            f"{model}: {imp['prunable_share'].mean():.0%} vs random {low['prunable_share'].mean():.0%} to "
            f"{high['prunable_share'].mean():.0%} (5-95%, {int(orders.min())} orders), above the 95th by "
            f"{_pct(pooled)}"
        )
        verdicts.append(over_interval(lambda v: REPRODUCED if v > 0 else NOT_REPRODUCED, pooled))
    return "; ".join(parts) + _seeds(r), for_every(verdicts)


def share_statistic(track: str) -> Callable[[Results], dict[str, Value]]:
    """``prunable(track)``'s statistic for the between-seed test: the importance order's prunable
    share with its bootstrap standard error over the scored examples (``pruning_runs.share_spreads``),
    the rounding error of the curve's step and its 5-95% bootstrap range (``between_seeds.Value``)."""

    def statistic(r: Results) -> dict[str, Value]:
        table = r[_SHARES]
        row = present(table[(table["track"] == track) & (table["order"] == "importance")], f"{_SHARES}: {track}").iloc[
            0
        ]
        return {
            track: with_error(row["prunable_share"], row, column="share_se", what=track, grain=_step(row), ranged=True)
        }

    return statistic


def _step(row: pd.Series) -> float:
    """The curve's step (a prunable share's grid), or a LookupError for a table without it."""
    if "step" not in row or pd.isna(row["step"]):
        raise LookupError("the curves' step")
    return float(row["step"])


def _ablation_statistic(r: Results) -> dict[str, Value]:
    """``importance_beats_ablation``'s statistic: per model, importance's prunable share less the
    ablation order's, with the paired bootstrap's standard error of that difference and the
    rounding error of two values on the step's grid (a grain of step * sqrt 2), on the shares the
    rule compares (``ablation_shares``)."""
    shares, _ = ablation_shares(r)
    out = {}
    for model, part in shares[shares["order"].isin(["importance", "ablation"])].groupby("model", sort=False):
        by_order = part.set_index("order")
        importance = by_order.loc["importance"]
        out[model] = with_error(
            importance["prunable_share"] - by_order.loc["ablation", "prunable_share"],
            importance,
            column="minus_ablation_se",
            what=model,
            grain=_step(importance) * np.sqrt(2),
        )
    return out


def _band_statistic(r: Results) -> dict[str, Value]:
    """``importance_beats_random``'s statistic: per model, importance's prunable share less the top
    of the random band (95th percentile), with the standard errors of both combined as independent:
    the share's over the scored examples (``share_se``), the percentile's over the random orders
    (``band_se``), and the rounding error of two values on the step's grid. The random orders' own
    sampling error over examples is left out (the band is about orders); a bootstrap of the 95th
    percentile of 20 orders understates its uncertainty, which the grid's rounding error bounds from
    below. A model whose band has too few orders is left out, as the rule leaves it undecided."""
    shares = r[_SHARES]
    out = {}
    for model, part in shares.groupby("model", sort=False):
        by_order = part.set_index("order")
        if RANDOM_HIGH not in by_order.index:
            raise NotTestable("no band of random orders")
        importance, high = by_order.loc["importance"], by_order.loc[RANDOM_HIGH]
        if not high["random_orders"] >= MIN_BAND_ORDERS:  # no band: the rule leaves this model undecided
            continue
        share, band = (
            with_error(importance["prunable_share"], importance, column="share_se", what=model),
            with_error(high["prunable_share"], high, column="band_se", what=f"{model}'s band"),
        )
        out[model] = Value(share.x - band.x, float(np.hypot(share.se, band.se)), grain=_step(importance) * np.sqrt(2))
    if not out:
        raise NotTestable(f"no model has a band of at least {MIN_BAND_ORDERS} random orders")
    return out


def _shares_sample(r: Results) -> str:
    return samples.curves(r[_SHARES])


def _share_rule(track: str) -> str:
    """The prunable-share rule of ``track`` in words, with the paper's share and the tolerance in points."""
    paper = paper_values.PRUNABLE_SHARE[track]
    return (
        f"reproduced: within {SHARE_TOLERANCE * 100:.0f} points of the paper's {paper:.0%}; partly: above 0; "
        "not reproduced: 0; read over the 95% interval of the share pooled over the seeds"
    )


CLAIMS = [
    Claim(
        "prunable_translation",
        "§4.2, Figure 3",
        "A share of the translation model's heads can be pruned with no noticeable loss",
        f"about {paper_values.PRUNABLE_SHARE['translation']:.0%} (WMT, within 1 BLEU)",
        _share_rule("translation"),
        CHAPTER,
        prunable("translation"),
        likelihood=True,
        sample=_shares_sample,
        seed_statistic=share_statistic("translation"),
    ),
    Claim(
        "prunable_classifier",
        "§4.2, Figure 3",
        "A share of the classifier's heads can be pruned with no noticeable loss",
        f"about {paper_values.PRUNABLE_SHARE['classifier']:.0%} (BERT, within 1 accuracy point)",
        _share_rule("classifier"),
        CHAPTER,
        prunable("classifier"),
        likelihood=True,
        sample=_shares_sample,
        seed_statistic=share_statistic("classifier"),
    ),
    Claim(
        "importance_beats_ablation",
        "§4.2, Figure 3",
        "Ranking by importance prunes at least as well as ranking by one-head ablation",
        "importance above the ablation curve",
        f"reproduced: for every model, importance's prunable share less ablation's (pooled over the seeds) lies "
        f"at least -{SHARE_TOLERANCE * 100:.0f} points over its whole 95% interval, both orders estimated on data "
        "the curves do not score (else cannot tell); not reproduced: the whole interval below "
        f"-{SHARE_TOLERANCE * 100:.0f} points; partly: for some models; cannot tell: both orders at 0 or both at 100% "
        "on every seed",
        CHAPTER,
        importance_beats_ablation,
        likelihood=True,
        sample=_shares_sample,
        seed_statistic=_ablation_statistic,
    ),
    Claim(
        "importance_beats_random",
        "§4.2, Figure 3",
        "Ranking by importance prunes more than pruning at random",
        "no random baseline in Figure 3 (Budhraja et al. 2020 find random pruning comes close)",
        "reproduced: for every model, importance's prunable share less the 95th percentile of the random orders' "
        "shares (pooled over the seeds) lies above 0 over its whole 95% interval; not reproduced: below it; partly: "
        f"for some models; cannot tell: a model's band has too few orders (under {MIN_BAND_ORDERS}) on some seed",
        CHAPTER,
        importance_beats_random,
        likelihood=True,
        sample=_shares_sample,
        seed_statistic=_band_statistic,
    ),
]


def findings(tables: ChapterTables) -> str:
    """Chapter 06's findings: per measure and model, the share prunable by importance, by ablation
    and the random orders' band on every seed, and how pruning everything ends (the comparisons
    are the verdicts')."""
    lines = []
    for suffix, measure in MEASURES:
        table = tables[f"06_prunable_shares{suffix}"]
        for (_track, model), part in table.groupby(["track", "model"], sort=False):
            by = {o: p.sort_values("training_seed") for o, p in part.groupby("order")}
            imp, abl = by["importance"], by["ablation"]
            low, high = by[RANDOM_LOW], by[RANDOM_HIGH]
            seeds = [int(s) for s in imp["training_seed"]]
            paper = imp["paper_prunable_share"].iloc[0]
            band = words([f"{a:.0%} to {b:.0%}" for a, b in zip(low["prunable_share"], high["prunable_share"])])
            orders = int(low["random_orders"].iloc[0])
            band_is = (
                "5th to 95th percentile"
                if orders >= MIN_BAND_ORDERS
                else f"their 5th to 95th percentile; {orders} orders are too few for a band"
            )
            lines.append(
                f"**{model}, {measure}.** By importance, {percents(imp['prunable_share'])} of the heads can go with "
                f"no noticeable loss (seed{'s' if len(seeds) > 1 else ''} {words([str(s) for s in seeds])}; the "
                f"paper: {paper:.0%}). By the one-head ablation order, {percents(abl['prunable_share'])} can go "
                f"(estimated on {abl['selected_on'].iloc[0]}). {orders} random orders prune {band} ({band_is}). With "
                f"every head pruned the score is {words([f'{v:.3g}' for v in imp['all_pruned']])}, against "
                f"{words([f'{v:.3g}' for v in imp['unpruned']])} unpruned."
            )
    return "\n\n".join(lines + _protocol_lines(tables) + _sample_lines(tables))


def _protocol_lines(tables: ChapterTables) -> list[str]:
    """The protocol drawn beside Figure 3 (``protocol_tables``), where this run drew it: per
    measure and model, the shares prunable by importance and by ablation on every seed."""

    lines = []
    for protocol in PROTOCOLS:
        for suffix, measure in MEASURES:
            table = tables.get(f"{_SHARES}_{protocol}{suffix}")
            for model, part in [] if table is None else table.groupby("model", sort=False):
                by = {o: p.sort_values("training_seed") for o, p in part.groupby("order")}
                imp, abl = by["importance"], by["ablation"]
                lines.append(
                    f"**Beside Figure 3, {model}, {measure}.** With the ablation order estimated on "
                    f"{abl['selected_on'].iloc[0]}, {percents(imp['prunable_share'])} of the heads can go by "
                    f"importance and {percents(abl['prunable_share'])} by ablation, on {int(imp['examples'].iloc[0])} "
                    "scored examples."
                )
    return lines


_SETTLED = 0.9  # a median Spearman with I_h of every example at or above this counts as a settled ranking


def _sample_lines(tables: ChapterTables) -> list[str]:
    """How many examples each model's I_h needs (``06_importance_sample_summary``): the agreement
    with I_h of all the examples at the largest sample below them, and the smallest sample whose
    median Spearman reaches ``_SETTLED``; none for a run from before the table existed."""
    from ..experiments.importance_sample import SUMMARY

    table = tables.get(SUMMARY)
    if table is None:
        return []
    parts = []
    for model, part in table.groupby("model", sort=False):
        used = int(part["used"].iloc[0])
        q = part.set_index("examples")
        below = [int(n) for n in q.index if n < used]
        if not below:
            parts.append(f"{model}: I_h rests on {used} examples, no smaller sample was drawn")
            continue
        n = max(below)
        settled = [k for k in below if q.loc[k, "spearman (median)"] >= _SETTLED]  # all of them agree with themselves
        parts.append(
            f"{model}: from {n} of its {used} examples, Spearman {q.loc[n, 'spearman (median)']:.2f} (5-95%: "
            f"{q.loc[n, 'spearman (5%)']:.2f} to {q.loc[n, 'spearman (95%)']:.2f}), and "
            f"{q.loc[n, 'bottom overlap (median)']:.0%} of the least important tenth found. A median Spearman of "
            f"{_SETTLED} is reached "
            + (f"from {min(settled)} examples." if settled else "at no size below all of them.")
        )
    return (
        [
            f"**How many examples importance needs.** Medians over {int(table['draws'].max())} random draws per "
            "size, against I_h of every example the verdict used:\n\n"
            + "\n".join(f"* {part}" for part in parts)
            + "\n\nA sample is part of the whole it is compared with, which raises the agreement as it grows. With "
            "no signal at all, Spearman is about the square root of the share drawn. And agreement with the whole "
            "says nothing about whether the whole itself is enough."
        ]
        + _curve_lines(table)
        + _rise_lines(table)
    )


def _ranges(table: pd.DataFrame, column: str, shown: Callable[[float], str], joined: str) -> dict[str, str]:
    """Per model, ``column``'s range over the draws at each sample size of the summary (its
    ``(min)`` and ``(max)``, one value where they print alike) and its value with every example."""
    out = {}
    for model, part in table.dropna(subset=[f"{column} (min)"]).groupby("model", sort=False):
        used = int(part["used"].iloc[0])
        sizes = part.set_index("examples")
        low, high = f"{column} (min)", f"{column} (max)"
        whole = f"{shown(sizes.loc[used, low])} with all {used}" if used in sizes.index else "none with all of them"
        ranges = ", ".join(
            shown(r[low])
            + (f"{joined}{shown(r[high])}" if shown(r[high]) != shown(r[low]) else "")
            + f" from {int(n)}"
            for n, r in sizes.iterrows()
            if n != used
        )
        out[str(model)] = f"{ranges}; {whole}."
    return out


def _curve_lines(table: pd.DataFrame) -> list[str]:
    """What pruning by I_h from n examples does to the share prunable on the likelihood: per model,
    its range over the drawn curves at each size, beside the share with every example."""
    if "prunable_share (min)" not in table:
        return []
    parts = _ranges(table, "prunable_share", lambda v: f"{v:.0%}", "-")
    return [
        "**Pruned by I_h from fewer examples.** The share of heads prunable within perplexity +1%, as its range "
        f"over {int(table['prunable_share (draws)'].max())} draws per size:\n\n"
        + "\n".join(f"* {model}: {text}" for model, text in parts.items())
        + "\n\nEach sample is part of the whole, so at the larger sizes the same share is partly built in. A share "
        "that already holds from a handful of examples is the finding."
    ]


def _rise_lines(table: pd.DataFrame) -> list[str]:
    """What pruning a language model by I_h from n examples does to its perplexity at the shares
    of its query heads the summary has columns for (``importance_sample.RISE``): per model and
    share, the range over the drawn curves at each size, beside the rise with every example."""
    from ..experiments.importance_sample import RISE

    columns = [c.removesuffix(" (min)") for c in table.columns if c.startswith(RISE) and c.endswith(" (min)")]
    parts = []
    for column in columns:
        share = column.removeprefix(RISE).removesuffix(" pruned (%)").strip()
        for model, text in _ranges(table, column, lambda v: f"{v:+.0f}%", " to ").items():
            parts.append(f"{model} with {share} of its query heads pruned: {text}")
    if not parts:
        return []
    return [
        "**A language model pruned by I_h from fewer examples.** The perplexity rise on chapter 11's report "
        f"verses, as its range over {int(table[f'{columns[0]} (draws)'].max())} draws per size. It is read at fixed "
        "shares of the query heads, since chapter 11's curves are coarser than the language model's tolerance:\n\n"
        + "\n".join(f"* {part}" for part in parts)
    ]
