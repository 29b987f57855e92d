"""Chapter 03, ablating one head: its experiment, the rules that judge its claims and its findings in words.

§3.2, masking one head at a time: the counts of Table 1's headline, per model, seed and kind.

``counts`` takes each model's stacked one-head effects (``HeadSweeps.effects(..., "one_head")``)
and counts every training run on its own rows (``head_effects.significance_counts``), so no
model's or run's rows reach another's; ``with_paper`` adds the paper's WMT Enc-Enc row
(``from_paper`` True).

Chapter 03's claims (§3.2, Table 1): few heads matter alone, most can go alone, masking one can
help. The rules read ``03_one_head_counts`` (and, in chapter 12, the same counts per removal).

``findings``: chapter 03's "What this run shows" paragraph.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist

import pandas as pd

from ...heads.significance import chance_flag_rate
from ..experiments import equivalence
from ..experiments.head_effects import correlation, significance_counts
from ..paper import values as paper_values
from ..store.results import ChapterTables
from ..verdicts import samples
from ..verdicts.between_seeds import Share
from ..verdicts.engine import (
    CANNOT_TELL,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Results,
    by_model,
    for_every,
    ours,
)
from ..verdicts.pooling import interval_se, over_counts
from ..verdicts.text import (
    MEASURES,
    heads_per_layer_line,
    paper_model,
    r_text,
    rows_by_model,
    words,
)

BINOMIAL_LEVEL = 0.01  # more significant heads than chance: P(Binomial(heads, 2 alpha) >= count) below it


def counts(
    models: Sequence[tuple[str, pd.DataFrame]],
    margins: Mapping[str, float] | None = None,
    measure: str = "metric",
    alpha: float | None = None,
) -> pd.DataFrame:
    """One row per model, training seed and attention kind: ``heads``, ``layers``, ``significant``,
    ``significant_up``, ``largest_drop``, ``largest_gain`` (``significance_counts``), with
    ``model``, ``training_seed`` and ``from_paper`` (False) first. With ``margins``
    (``equivalence.margin``), also the ``margin`` in the score's unit and the heads of each
    equivalence class (``harmful``, ``negligible``, ``helpful``, ``undetermined``) and those neither
    test places (``unplaced``: not significant and undetermined). ``unit`` names the score's unit
    (accuracy, BLEU or nats), in which ``largest_*`` and ``resolution`` are given. With ``alpha``
    (the bootstrap's level), each row also carries its model and seed's statistics
    (``model_statistics``)."""

    def one(name: str, seed: int, part: pd.DataFrame) -> pd.DataFrame:
        track = "classifier" if set(part["kind"]) == {"self"} else "translation"
        unit = "nats" if measure == "likelihood" else "accuracy" if track == "classifier" else "BLEU"
        table = significance_counts(part).assign(model=name, training_seed=seed, from_paper=False, unit=unit)
        if margins is None:
            return table
        delta = equivalence.margin(track, measure, margins)
        by_kind = [equivalence.placement(rows, delta) for _, rows in part.groupby("kind", sort=False)]
        return pd.concat([table.assign(margin=delta), pd.DataFrame(by_kind, index=table.index)], axis=1)

    out = pd.concat(
        [one(name, s, part) for name, effects in models for s, part in effects.groupby("training_seed")],
        ignore_index=True,
    )
    if alpha is not None:
        out = out.merge(model_statistics(out, dict(models), alpha), on=["model", "training_seed"], how="left")
    return out[["model", "training_seed", *out.columns.drop(["model", "training_seed"])]]


def model_statistics(counts: pd.DataFrame, effects: Mapping[str, pd.DataFrame], alpha: float) -> pd.DataFrame:
    """Per model and training seed of ``counts`` (its kinds' rows summed): ``model heads``,
    ``model significant``; ``expected by chance``, the heads a test at ``alpha`` flags among
    heads with no effect in either direction (2·alpha of them, ``chance_flag_rate``), and ``gains
    expected by chance`` in one direction (alpha of them); ``binomial
    p``, P(Binomial(heads, 2·alpha) >= significant), which takes the heads' tests as independent
    (they share examples, so it is optimistic); ``beyond chance``, that p below
    ``BINOMIAL_LEVEL``; and ``split-half r``, the Pearson r of the masked scores on the even and
    the odd examples over that seed's heads (``effects[model]``'s ``score_even``, ``score_odd``)."""
    from scipy.stats import binom

    rows = []
    for (model, seed), part in counts.groupby(["model", "training_seed"], sort=False):
        heads, significant = int(part["heads"].sum()), int(part["significant"].sum())
        mine = effects[model][effects[model]["training_seed"] == seed]
        p = float(binom.sf(significant - 1, heads, chance_flag_rate(alpha)))
        rows.append(
            {
                "model": model,
                "training_seed": seed,
                "model heads": heads,
                "model significant": significant,
                "expected by chance": chance_flag_rate(alpha) * heads,
                "gains expected by chance": chance_flag_rate(alpha, one_direction=True) * heads,
                "binomial p": p,
                "beyond chance": p < BINOMIAL_LEVEL,
                "split-half r": correlation(mine, "score_even", "score_odd")[0],
            }
        )
    return pd.DataFrame(rows)


def _paper_row() -> dict:
    """The paper's count for WMT's encoder self-attention (Table 1: 8 of 96, 4 of them gains)."""
    table1 = paper_values.table(1)
    return {
        "model": "WMT",
        "from_paper": True,
        "kind": "enc_self",
        "heads": 96,
        "layers": paper_values.HEADS_PER_KIND["WMT"] // paper_values.HEADS_PER_LAYER["WMT"],
        "significant": paper_values.SIGNIFICANT_ENC_SELF,
        "significant_up": paper_values.SIGNIFICANT_ENC_SELF_UP,
        "largest_drop": table1["delta"].min(),
        "largest_gain": table1["delta"].max(),
    }


def with_paper(ours: pd.DataFrame) -> pd.DataFrame:
    """``ours`` (from ``counts``) with the paper's row below."""
    return pd.concat([ours, pd.DataFrame([_paper_row()])], ignore_index=True)


def by_seed(table: pd.DataFrame) -> pd.DataFrame:
    """Our rows of a counts table as ``significant (up) of heads``, one column per training seed."""
    ours = table[~table["from_paper"].astype(bool)]
    cell = (
        ours["significant"].astype(int).astype(str)
        + " ("
        + ours["significant_up"].astype(int).astype(str)
        + " up) of "
        + ours["heads"].astype(int).astype(str)
    )
    return (
        ours.assign(cell=cell)
        .pivot(index=["model", "kind"], columns="training_seed", values="cell")
        .rename(columns=lambda s: f"seed {int(s)}")
    )


def both_measures(metric: pd.DataFrame, likelihood: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The significant counts on the paper's metric and on the likelihood side by side, per model,
    seed and kind, with the count a test at ``alpha`` flags by chance among heads with no effect
    (``chance_flag_rate``: 2·alpha of the heads, since p is taken in the observed direction),
    and (where the tables have them) the heads shown negligible and those neither test places."""
    keys = ["model", "training_seed", "kind"]
    ours = metric[~metric["from_paper"].astype(bool)]
    shown = [c for c in ("significant", "significant_up", "negligible", "unplaced") if c in ours and c in likelihood]
    both = ours[keys + ["heads", *shown]].merge(
        likelihood[keys + shown], on=keys, suffixes=(" (the paper's metric)", " (the likelihood)")
    )
    both.insert(4, "expected by chance", both["heads"] * chance_flag_rate(alpha))
    return both


def base_scores(effects: pd.DataFrame, digits: int) -> str:
    """Each training run's unmasked score, ``"0: 0.7300, 1: 0.7340"`` (``digits`` decimals)."""
    return ", ".join(f"{int(s)}: {b:.{digits}f}" for s, b in effects.groupby("training_seed")["base"].first().items())


def paper_table1() -> pd.DataFrame:
    """The paper's Table 1 as a layer x head grid of ``+0.12*`` cells (``*``: significant)."""
    t1 = paper_values.table(1)
    cells = [f"{d:+.2f}" + ("*" if s else "") for d, s in zip(t1["delta"], t1["significant"])]
    return (
        t1.assign(cell=cells).pivot(index="layer", columns="head", values="cell").rename(index=lambda i: f"layer {i}")
    )


def likelihood_sweeps(sweeps, sets: Mapping[str, Sequence]) -> dict[str, pd.DataFrame]:
    """``{model: effects}``: every head masked alone on each of ``sets`` (``{model: examples}``),
    scored by likelihood on every training run (``HeadSweeps.effects``; the accuracy sweep's
    cache serves it)."""
    return {name: sweeps.effects(name, data, configs="one_head", measure="likelihood") for name, data in sets.items()}


def score_histograms(translation: pd.DataFrame, classifier: pd.DataFrame, titles: tuple[str, str], profile: str):
    """Figure 1's two panels: the scores after masking each head alone (one training run's rows
    of ``HeadSweeps.effects``), BLEU stacked by attention kind on the left, accuracy on the right,
    with the unmasked score as a red dashed line; the title names ``profile`` and the translation
    rows' training seed. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    panels = [(translation, "BLEU", {"hue": "kind", "multiple": "stack"}), (classifier, "accuracy", {})]
    for ax, (rows, label, style), title in zip(axes, panels, titles):
        sns.histplot(data=rows, x="score", bins=30, ax=ax, **style)
        ax.axvline(rows["base"].iloc[0], color="red", linestyle="--")
        ax.set(title=title, xlabel=label, ylabel="heads")
    shown = int(translation["training_seed"].iloc[0])
    fig.suptitle(f"scores after masking one head ({profile}, training seed {shown})")
    fig.tight_layout()
    return fig


CHAPTER = "03_ablating_one_head"
FEW_SHARE = 0.20  # "few heads matter alone": under this share of a model's heads significant
GAIN_LEVEL = 0.05  # the family-wise level of "some head's gain is significant" (Bonferroni over the heads)
GAIN_POWER = 0.80  # the power the gain verdict's text is stated at
COUNTS = "03_one_head_counts"
PAPER_COUNT = f"{paper_values.SIGNIFICANT_ENC_SELF} of {paper_values.HEADS_PER_KIND['WMT']}"  # Table 1's Enc-Enc


def few_significant(r: Results) -> tuple[str, str]:
    """Per model, under ``FEW_SHARE`` of the heads significant, read over every count the heads
    placed by neither test allow (``over_counts``: they may turn out significant with more
    examples): a model whose unplaced heads could lift its count to ``FEW_SHARE`` cannot tell, one
    whose count is there already refutes it. Reproduced where every model holds, partly where some
    do (``for_every``)."""
    table = ours(r[COUNTS])
    columns = ["heads", "significant"] + (["unplaced"] if "unplaced" in table else [])
    counts = table.groupby("model")[columns].sum()
    verdicts, parts = [], []
    for model, row in counts.iterrows():
        heads, found = int(row["heads"]), int(row["significant"])
        unplaced = int(row["unplaced"]) if "unplaced" in row else 0
        few = lambda k, heads=heads: REPRODUCED if k < FEW_SHARE * heads else NOT_REPRODUCED
        verdicts.append(over_counts(few, found, unplaced))
        parts.append(f"{model} {found}/{heads}" + (f" ({unplaced} placed by neither test)" if unplaced else ""))
    together = f" ({len(r.seeds)} seeds' heads together)" if len(r.seeds) > 1 else ""
    return "; ".join(parts) + together, for_every(verdicts)


def most_negligible(r: Results) -> tuple[str, str]:
    """Over 80% negligible per model; where fewer are, but the undetermined heads could still
    make it so, the model is undecided (``cannot tell``) rather than a refutation."""
    counts = ours(r[COUNTS]).groupby("model")[["heads", "negligible", "undetermined", "unplaced"]].sum()
    shares = counts["negligible"] / counts["heads"]
    could = (counts["negligible"] + counts["undetermined"]) / counts["heads"]
    text = "; ".join(
        f"{m} {int(row['negligible'])}/{int(row['heads'])} negligible, {int(row['undetermined'])} undetermined"
        + (f" ({int(row['unplaced'])} placed by neither test)" if row["unplaced"] else "")
        for m, row in counts.iterrows()
    )
    holds = shares > 1 - FEW_SHARE
    return text, by_model(holds, ~holds & (could > 1 - FEW_SHARE))


def some_gain(r: Results) -> tuple[str, str]:
    """Masking a head can help: some head's gain is significant with a Bonferroni correction over
    every head tested (``GAIN_LEVEL`` family-wise). The heads are scored on the same examples, so
    their tests are correlated; Bonferroni holds its level under any correlation (a count against
    a binomial's chance would not: tests/test_rules_can_fail.py simulates both). A head's test
    reads its bootstrap interval (``significance.paired_bootstrap``: the alpha and 1 - alpha
    quantiles) as a normal one: its standard error is the interval's width over 2 z(1 - alpha), so
    p-values far below the bootstrap's 1 / resamples can be read.

    Not reproduced: every head's gain is shown below the margin +δ (chapter 03's margins) at the
    same family-wise level (no head can raise the score noticeably). On the likelihood a gain must
    lie beyond +δ (``GAIN_MARGIN``), as a significant gain in thousandths of a nat means little.
    The text states the power: the true gain (in the score's unit) one head needs for the test to
    find it with ``GAIN_POWER``, at the median head's error."""
    heads = _head_tests(r)
    total = len(heads)
    critical = _critical(total)
    beyond = heads["margin"] if r.measure else 0.0
    z = (heads["delta"] - beyond) / heads["se"]
    found = heads[z > critical]
    below = heads["delta"] + critical * heads["se"] < heads["margin"]
    parts = []
    for model, part in heads.groupby("model", sort=False):
        top = part.loc[part["delta"].idxmax()]
        power = (critical + NormalDist().inv_cdf(GAIN_POWER)) * float(part["se"].median()) + (
            float(part["margin"].iloc[0]) if r.measure else 0.0
        )
        parts.append(
            f"{model}: {int((z[part.index] > critical).sum())} of {len(part)} heads, the largest gain "
            f"{top['delta']:+.4f} ({'z beyond +δ' if r.measure else 'z'} = "
            f"{(top['delta'] - (top['margin'] if r.measure else 0.0)) / top['se']:.1f}); "
            f"a head gaining {power:.4f} is found with {GAIN_POWER:.0%} power"
        )
    what = "gains beyond +δ" if r.measure else "significant gains"
    text = f"{what} with a Bonferroni correction over the {total} heads (z > {critical:.2f}): " + "; ".join(parts)
    if len(found):
        return text, REPRODUCED
    return text, NOT_REPRODUCED if below.all() else CANNOT_TELL


PER_HEAD = {"classifier": "03_one_head_classifier", "translation": "03_one_head_translation"}


def _critical(tests: int) -> float:
    """The one-sided z a test must pass among ``tests`` for a family-wise ``GAIN_LEVEL``."""
    return NormalDist().inv_cdf(1 - GAIN_LEVEL / tests)


def _head_tests(r: Results) -> pd.DataFrame:
    """Every head of chapter 03's per-head tables (each model, each seed in ``r``): model, delta,
    its standard error read off its bootstrap interval (``se``: the alpha and 1 - alpha quantiles,
    alpha / 2 on a row of two looks; > 0: a head whose resamples all agree gets the smallest error
    any head of its model has) and the margin δ of its model's score (``03_one_head_counts``'
    ``margin``)."""
    alpha = r.params["alpha"]
    counts = ours(r[COUNTS])
    kinds = counts.groupby("model", sort=False)["kind"].agg(set)
    margins = counts.groupby("model", sort=False)["margin"].first()
    tables = []
    for track, name in PER_HEAD.items():
        # the classifier is the model with self-attention alone; the translation model has the others
        model = next(m for m, k in kinds.items() if (k == {"self"}) == (track == "classifier"))
        table = r[name].assign(model=model)
        se = interval_se(table, alpha).clip(lower=0)
        smallest = se[se > 0].min() if (se > 0).any() else 1e-12
        tables.append(table.assign(se=se.where(se > 0, smallest), margin=float(margins[model])))
    return pd.concat(tables, ignore_index=True)


def shares_of(column: str, undecided: str = "", per_model: bool = True):
    """A claim's statistic for the between-seed test: ``column`` of the heads, per model (or
    pooled), as ``Share``s, with the heads ``undecided`` (a column) leaves open."""

    def statistic(r: Results) -> dict[str, Share]:
        table = ours(r[COUNTS]).assign(all="all heads")
        columns = ["heads", column] + ([undecided] if undecided else [])
        counts = table.groupby("model" if per_model else "all")[columns].sum()
        return {
            f"{m}: {column}": Share(int(row[column]), int(row["heads"]), int(row[undecided]) if undecided else 0)
            for m, row in counts.iterrows()
        }

    return statistic


def _gains_statistic(r: Results) -> dict[str, Share]:
    """``some_gain``'s statistic: the heads whose gain passes the Bonferroni-corrected test (on the
    likelihood, beyond +δ), among all the heads of the seed."""
    heads = _head_tests(r)
    beyond = heads["margin"] if r.measure else 0.0
    found = int(((heads["delta"] - beyond) / heads["se"] > _critical(len(heads))).sum())
    return {"gains": Share(found, len(heads))}


def counts_sample(r: Results) -> str:
    return samples.one_head(r[COUNTS])


CLAIMS = [
    Claim(
        "few_significant",
        "§3.2, Table 1",
        "Few heads matter alone: masking one changes the score significantly for a minority",
        f"{paper_values.SIGNIFICANT_ENC_SELF} of {paper_values.HEADS_PER_KIND['WMT']} WMT Enc-Enc heads",
        f"reproduced: under {FEW_SHARE:.0%} of the heads significant in every model, however many of the heads "
        "placed by neither test (not significant, interval across the margin) turn out significant; partly: in "
        "some; cannot tell: in none, but where those heads could decide it either way",
        CHAPTER,
        few_significant,
        likelihood=True,
        sample=counts_sample,
        seed_statistic=shares_of("significant", "unplaced"),
    ),
    Claim(
        "most_negligible",
        "§3.2, Table 1",
        "Most heads can go alone: masking one is shown to change the score by less than a noticeable margin",
        f"{PAPER_COUNT} significant (the paper tests no equivalence)",
        f"reproduced: over {1 - FEW_SHARE:.0%} of the heads negligible (their interval within ±δ, chapter 03's "
        "margins) in every model; partly: in some; cannot tell: in none, but the undetermined heads could make it so",
        CHAPTER,
        most_negligible,
        likelihood=True,
        sample=counts_sample,
        seed_statistic=shares_of("negligible", "undetermined"),
    ),
    Claim(
        "some_gain",
        "§3.2, Table 1",
        "Masking a head can improve the score",
        f"{paper_values.SIGNIFICANT_ENC_SELF_UP} of the {paper_values.SIGNIFICANT_ENC_SELF} significant changes are "
        "gains",
        f"reproduced: some head's gain is significant with a Bonferroni correction over every head tested "
        f"(family-wise {GAIN_LEVEL}, whatever the heads' tests share); not reproduced: every head's gain is shown "
        "below +δ (chapter 03's margins) at that level; cannot tell: neither",
        CHAPTER,
        some_gain,
        likelihood=True,
        sample=counts_sample,
        parameters={"alpha": 0.01},
        seed_statistic=_gains_statistic,
        likelihood_rule="the same rule, a gain counting only beyond +δ (chapter 03's margins)",
    ),
]


def findings(tables: ChapterTables, alpha: float) -> str:
    """Chapter 03's findings: each model's heads per layer beside the paper's; per model, measure
    and seed, the heads significant alone against chance, the gains among them, and the split-half r
    of the one-head effects."""
    first = ours(tables["03_one_head_counts"])
    lines = [
        heads_per_layer_line(
            [
                (name, int(part["heads"].iloc[0] // part["layers"].iloc[0]), paper_model(part["kind"]))
                for name, part in rows_by_model(first)
            ]
        )
    ]
    for suffix, measure in MEASURES:
        counts = ours(tables[f"03_one_head_counts{suffix}"])
        for name, part in rows_by_model(counts):
            per_seed = part.groupby("training_seed", sort=True)
            model = per_seed.first()  # the model and seed's statistics (``model_statistics``)
            heads = int(model["model heads"].iloc[0])
            sig = {int(s): int(n) for s, n in model["model significant"].items()}
            up = {int(s): int(p["significant_up"].sum()) for s, p in per_seed}
            where = {int(s): [k for k, n in zip(p["kind"], p["significant"]) if n] for s, p in per_seed}
            half = {int(s): float(r) for s, r in model["split-half r"].items()}
            chance = float(model["expected by chance"].iloc[0])
            seeds = sorted(sig)
            above = [s for s in seeds if bool(model.loc[s, "beyond chance"])]
            plural = "s" if len(seeds) > 1 else ""
            text = (
                f"**{name}, {measure}.** Masked alone, {words([str(sig[s]) for s in seeds])} of {heads} heads "
                f"change the score significantly (training seed{plural} {words([str(s) for s in seeds])}). That is "
                f"{words([f'{sig[s] / heads:.0%}' for s in seeds])} of the heads; the paper found {PAPER_COUNT}."
            )
            kinds = sorted({k for s in seeds for k in where[s]})
            if len(kinds) > 1 or (kinds and kinds != ["self"]):
                text += f" The significant heads are in {words(kinds)}."
            text += (
                f" Chance alone would flag {chance:.1f}, since the test at p < {alpha} flags a change in either "
                "direction (2·alpha of the heads)."
            )
            binomial = f"(binomial test, p < {BINOMIAL_LEVEL}, taking the heads' tests as independent)"
            if not above:
                text += (
                    f" On no seed do more heads pass than chance alone would flag {binomial}. On this measure the "
                    "one-head effects are not seen."
                )
            elif len(above) < len(seeds):
                text += (
                    f" Only on seed{'s' if len(above) > 1 else ''} {words(above)} do more heads pass than chance "
                    f"alone would flag {binomial}."
                )
            else:
                text += (
                    f" On every seed more heads pass than chance alone would flag {binomial}. The heads share "
                    "examples, so this p is optimistic."
                )
            gains = [s for s in seeds if up[s] > 0]
            text += (
                " Removing a head gives a significant gain "
                + ("on no seed" if not gains else "; ".join(f"{up[s]} times on seed {s}" for s in gains))
                + f", against {float(model['gains expected by chance'].iloc[0]):.1f} expected by chance in that "
                f"direction (the paper: {paper_values.SIGNIFICANT_ENC_SELF_UP} of its "
                f"{paper_values.SIGNIFICANT_ENC_SELF})."
            )
            if "negligible" in part:
                text += " " + _equivalence_text(part, per_seed, seeds, likelihood=bool(suffix))
            text += (
                f" The split-half r of the effects (even against odd examples) is "
                f"{words([r_text(half[s]) for s in seeds])}."
            )
            weak = [s for s in seeds if not half[s] >= 0.5]
            text += (
                " The halves agree: the effects replicate across examples."
                if not weak
                else f" It is below 0.5 on seed{'s' if len(weak) > 1 else ''} {words(weak)}. There a head's effect on "
                "half of the examples barely predicts it on the other half, and a count near chance is noise."
            )
            lines.append(text)
    return "\n\n".join(lines)


def _equivalence_text(part, per_seed, seeds: list[int], likelihood: bool) -> str:
    """The heads of each equivalence class against the chapter's margin, seed by seed."""
    delta = float(part["margin"].iloc[0])
    margin = (
        f"{math.expm1(delta):.0%} of perplexity ({delta:.4f} nats)"
        if likelihood
        else f"{delta * 100:.2g} accuracy points"
        if set(part["kind"]) == {"self"}
        else f"{delta:.2g} BLEU"
    )
    count = {
        c: words([str(int(per_seed[c].sum().loc[s])) for s in seeds])
        for c in ("negligible", "harmful", "helpful", "undetermined", "unplaced")
    }
    return (
        f"Against a margin of ±{margin}, {count['negligible']} heads are shown negligible, {count['harmful']} "
        f"harmful, {count['helpful']} helpful and {count['undetermined']} undetermined. {count['unplaced']} are "
        "placed by neither test: not significant, yet not shown negligible."
    )
