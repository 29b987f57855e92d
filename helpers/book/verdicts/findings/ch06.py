"""Chapter 06's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

import pandas as pd

from ...store.columns import MIN_BAND_ORDERS, RANDOM_HIGH, RANDOM_LOW
from .text import MEASURES, percents, read, words


def findings(profile: str) -> str:
    """Chapter 06's findings: per measure and model, the share prunable by importance, by ablation
    and the random orders' band on every seed, and how pruning everything ends (the comparisons
    are the verdicts')."""
    lines = []
    for suffix, measure in MEASURES:
        table = read(profile, f"06_prunable_shares{suffix}")
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
                else f"their 5th to 95th percentile, but {orders} orders are too few for a band"
            )
            lines.append(
                f"**{model}, {measure}:** by importance, {percents(imp['prunable_share'])} of the heads can go with "
                "no "
                f"noticeable loss (seed{'s' if len(seeds) > 1 else ''} {words([str(s) for s in seeds])}; the paper: "
                f"{paper:.0%}), by the one-head ablation order {percents(abl['prunable_share'])} (estimated on "
                f"{abl['selected_on'].iloc[0]}); {orders} random orders prune {band} ({band_is}). With every head "
                f"pruned the score is "
                f"{words([f'{v:.3g}' for v in imp['all_pruned']])}, against "
                f"{words([f'{v:.3g}' for v in imp['unpruned']])} "
                "unpruned."
            )
    return "\n\n".join(lines + sample_lines(profile))


SETTLED = 0.9  # a median Spearman with I_h of every example at or above this counts as a settled ranking


def sample_lines(profile: str) -> list[str]:
    """How many examples each model's I_h needs (``06_importance_sample``): the agreement with I_h
    of all the examples at the largest sample below them, and the smallest sample whose median
    Spearman reaches ``SETTLED``; none for a run from before the table existed."""
    from ...store.results import saved_table

    table = saved_table(profile, "06_importance_sample")
    if table is None:
        return []
    parts = []
    for model, part in table.groupby("model", sort=False):
        used = int(part["used"].iloc[0])
        q = part.groupby("examples")[["spearman", "bottom overlap"]].quantile([0.05, 0.5, 0.95]).unstack()
        below = [n for n in q.index if n < used]
        if not below:
            parts.append(f"{model}: I_h rests on {used} examples, no smaller sample was drawn")
            continue
        n = max(below)
        settled = [
            int(k) for k in below if q.loc[k, ("spearman", 0.5)] >= SETTLED
        ]  # all of them agree with themselves
        parts.append(
            f"{model}: from {n} of its {used} examples, Spearman {q.loc[n, ('spearman', 0.5)]:.2f} (5-95%: "
            f"{q.loc[n, ('spearman', 0.05)]:.2f} to {q.loc[n, ('spearman', 0.95)]:.2f}) and "
            f"{q.loc[n, ('bottom overlap', 0.5)]:.0%} of the least important tenth found; a median Spearman of "
            f"{SETTLED} " + (f"from {min(settled)} examples" if settled else "at no size below all of them")
        )
    draws = int(table.groupby(["model", "examples"]).size().max())
    return (
        [
            f"**How many examples importance needs** (medians over {draws} random draws per size, against I_h of "
            f"every example the verdict used): " + "; ".join(parts) + ". A sample is part of the whole it is compared "
            "with, which raises the agreement as it grows (with no signal at all, Spearman is about the square root "
            "of "
            "the share drawn), and agreement with the whole says nothing about whether the whole itself is enough."
        ]
        + curve_lines(table)
        + rise_lines(table)
    )


def curve_lines(table: pd.DataFrame) -> list[str]:
    """What pruning by I_h from n examples does to the share prunable on the likelihood: per model,
    its range over the drawn curves at each size, beside the share with every example."""
    if "prunable_share" not in table or table["prunable_share"].isna().all():
        return []
    curves = table.dropna(subset=["prunable_share"])
    parts = []
    for model, part in curves.groupby("model", sort=False):
        used = int(part["used"].iloc[0])
        sizes = part.groupby("examples")["prunable_share"].agg(["min", "max", "size"])
        whole = f"{sizes.loc[used, 'min']:.0%} with all {used}" if used in sizes.index else "no curve with all of them"
        ranges = ", ".join(
            f"{r['min']:.0%}" + (f"-{r['max']:.0%}" if r["max"] > r["min"] else "") + f" from {n}"
            for n, r in sizes.iterrows()
            if n != used
        )
        parts.append(f"{model}: {ranges}; {whole}")
    draws = int(curves.groupby(["model", "examples"]).size().max())
    return [
        f"**Pruned by I_h from fewer examples** (the share of heads prunable within perplexity +1%, the range over "
        f"{draws} draws per size): " + "; ".join(parts) + ". Each sample is part of the whole, so at the larger sizes "
        "the same share is partly built in; a share that already holds from a handful of examples is the finding."
    ]


def rise_lines(table: pd.DataFrame) -> list[str]:
    """What pruning a language model by I_h from n examples does to its perplexity at the shares
    of its query heads the table has columns for (``importance_sample.RISE``): per model and
    share, the range over the drawn curves at each size, beside the rise with every example."""
    from ...experiments.importance_sample import RISE

    columns = [c for c in table.columns if c.startswith(RISE) and table[c].notna().any()]
    parts = []
    for column in columns:
        share = column.removeprefix(RISE).removesuffix(" pruned (%)").strip()
        for model, part in table.dropna(subset=[column]).groupby("model", sort=False):
            used = int(part["used"].iloc[0])
            sizes = part.groupby("examples")[column].agg(["min", "max"])
            whole = (
                f"{sizes.loc[used, 'min']:+.0f}% with all {used}" if used in sizes.index else "none with all of them"
            )
            ranges = ", ".join(
                f"{r['min']:+.0f}%"
                + (f" to {r['max']:+.0f}%" if round(r["max"]) > round(r["min"]) else "")
                + f" from {n}"
                for n, r in sizes.iterrows()
                if n != used
            )
            parts.append(f"{model} with {share} of its query heads pruned: {ranges}; {whole}")
    if not parts:
        return []
    draws = int(table.dropna(subset=columns[:1]).groupby(["model", "examples"]).size().max())
    return [
        f"**A language model pruned by I_h from fewer examples** (the perplexity rise on chapter 11's report "
        f"verses, the range over {draws} draws per size, read at fixed shares of the query heads: chapter 11's "
        "curves are coarser than the language model's tolerance): " + "; ".join(parts) + "."
    ]
