"""Chapter 12's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

import pandas as pd

from ...store.columns import CHOSEN, IN_SAMPLE, MIN_BAND_ORDERS, RANDOM_HIGH, RANDOM_LOW
from ..rules.ch12 import verdicts_by_removal
from .text import read, words

CHAPTER = "12_unimportant_or_unmeasured"


def _seed(value) -> str:
    return "no training seed" if pd.isna(value) else f"seed {int(value)}"


def not_measured_lines(profile: str) -> list[str]:
    """The models whose sample was below a bootstrap's minimum, so that no removal was tested on them."""
    try:
        samples = read(profile, "12_removal_samples")
    except FileNotFoundError:  # a run from before the minimum
        return []

    def why(r) -> str:
        reason = r.get("reason")
        if isinstance(reason, str) and reason.startswith("not run"):
            return f"{reason}; rerun with `-p lm_removals True` to measure it"
        return f"a bootstrap needs at least {int(r['min_units'])}: rerun with more `lm_verses`"

    return [
        f"**{r['model']}, the {r['measure']}: not measured** (n = {int(r['units'])} {r['unit']}; {why(r)})."
        for _, r in samples.iterrows()
        if not r["measured"]
    ]


def removal_lines(profile: str) -> list[str]:
    """Per measure and model: negligible, harmful and undetermined heads under each removal kind."""
    lines = []
    for suffix, measure in (("", "the paper's metric"), ("_likelihood", "the likelihood")):
        table = read(profile, f"12_removal_counts{suffix}")
        summed = (
            table.groupby(["model", "training_seed", "removal"], sort=False, dropna=False)[
                ["heads", "significant", "negligible", "harmful", "helpful", "undetermined"]
            ]
            .sum()
            .reset_index()
        )
        for (name, seed), part in summed.groupby(["model", "training_seed"], sort=False, dropna=False):
            heads = int(part["heads"].iloc[0])
            per_kind = [
                f"{r.removal} {int(r.negligible)} negligible, {int(r.harmful)} harmful, "
                f"{int(r.undetermined)} undetermined ({int(r.significant)} significant)"
                for r in part.itertuples()
            ]
            lines.append(f"**{name}, {measure}, {_seed(seed)}** ({heads} heads): {'; '.join(per_kind)}.")
    return lines


def agreement_lines(profile: str) -> list[str]:
    """The Spearman correlations between kinds and the shared most important heads, per model."""
    table = read(profile, "12_removal_agreement")
    top = next(c for c in table.columns if c.startswith("top "))
    lines = []
    for name, part in table.groupby("model", sort=False):
        pairs = [
            f"{r['kinds']} r = {r['spearman']:.2f} ({_seed(r['training_seed'])}; {int(r[top])} of the "
            f"{top.split()[1]} most important heads shared)"
            for _, r in part.iterrows()
        ]
        lines.append(
            f"**Do the kinds agree on {name}?** Spearman correlation of the one-head changes: {words(pairs)}."
        )
    return lines


def _band_text(part: pd.DataFrame) -> str:
    """Each method that chooses heads against the random orders' band, per seed: on how many seeds
    its prunable share lies above the band's 95th percentile (decided per seed, no method picked
    after the fact)."""
    high = part[part["method"] == RANDOM_HIGH]
    if high.empty:
        return "No band of random orders was run."
    orders = int(high["random_orders"].min()) if "random_orders" in high else 0
    if orders < MIN_BAND_ORDERS:
        return f"With {orders} random orders there is no band to compare with (a 5-95% band needs {MIN_BAND_ORDERS})."
    ceiling = high.set_index("training_seed")["prunable_share"]
    counts = []
    for method, rows in part[part["method"].isin(CHOSEN)].groupby("method", sort=False):
        above = sum(
            bool(share > ceiling.get(seed, float("nan")))
            for seed, share in zip(rows["training_seed"], rows["prunable_share"])
        )
        counts.append(f"{method} on {above} of {len(rows)}")
    return (
        f"Above the 95th percentile of {orders} random orders' shares, seed by seed: {words(counts)}; where a method "
        "is not above it, this run cannot tell it from random pruning."
    )


def selection_lines(profile: str) -> list[str]:
    """Per measure and model: each method's prunable share, which of the methods that choose heads
    out of sample keep the score longest (ties named as ties), and each against the random band."""
    lines = []
    for suffix, measure in (("", "the paper's metric"), ("_likelihood", "the likelihood")):
        table = read(profile, f"12_selection{suffix}")
        for name, part in table.groupby("model", sort=False):
            shown = part[~part["method"].isin([RANDOM_LOW, RANDOM_HIGH])]
            share = shown.groupby("method", sort=False)["prunable_share"]
            mean, low, high = share.mean(), share.min(), share.max()
            ranked = "; ".join(
                f"{m} {mean[m]:.0%} ({low[m]:.0%} to {high[m]:.0%})" for m in mean.sort_values(ascending=False).index
            )
            fair = part[part["method"].isin(CHOSEN) & (part["selected_on"] != IN_SAMPLE)]
            fair_mean = fair.groupby("method", sort=False)["prunable_share"].mean()
            best = [m for m, v in fair_mean.items() if v == fair_mean.max()]
            area = fair.groupby("method", sort=False)["area"].mean()
            lines.append(
                f"**Choosing heads on {name}, {measure}:** share prunable within δ, mean over seeds (range): "
                f"{ranked}. Of the methods that choose heads out of sample, "
                + (
                    f"{best[0]} keeps the score longest by that share"
                    if len(best) == 1
                    else f"{words(best)} tie at {fair_mean.max():.0%}"
                )
                + f"; by the area under the curve {area.idxmax()} does. "
                + _band_text(part)
            )
    points = read(profile, "12_l0_points")
    seconds = points.groupby(["model", "training_seed"])["seconds"].sum()
    lines.append(
        f"The L0 gates took {seconds.min():.0f} to {seconds.max():.0f} s per model and seed to train, all penalties "
        f"({words([f'{p:g}' for p in sorted(points['penalty'].unique())])} as penalties); their points prune "
        f"{points['share'].min():.0%} to {points['share'].max():.0%} of the heads."
    )
    return lines


def changed_verdicts(profile: str) -> str:
    """The scorecard's verdicts on chapter 03's two rules that change with the way a head is removed."""
    table = verdicts_by_removal(profile)
    changed = []
    for (key, measure, seed), part in table.groupby(["key", "measure", "training_seed"], sort=False, dropna=False):
        if part["verdict"].nunique() > 1:
            changed.append(
                f"{key.replace('_', ' ')} on {measure}, {_seed(seed)}: "
                + ", ".join(f"{k} {v}" for k, v in zip(part["removal"], part["verdict"]))
            )
    if not changed:
        return (
            "**Which verdicts change with the way a head is removed:** none; chapter 03's two rules give the "
            "same verdict under every kind."
        )
    checked = table.groupby(["key", "measure", "training_seed"], dropna=False).ngroups
    return (
        f"**Which verdicts change with the way a head is removed ({len(changed)} of {checked}):** "
        + "; ".join(changed)
        + "."
    )


def findings(profile: str) -> str:
    """Chapter 12's findings from its saved tables."""
    return "\n\n".join(
        removal_lines(profile)
        + not_measured_lines(profile)
        + [changed_verdicts(profile)]
        + agreement_lines(profile)
        + selection_lines(profile)
    )
