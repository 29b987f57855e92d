"""Chapter 03's claims (§3.2, Table 1): few heads matter alone, most can go alone, masking one can
help. The rules read ``03_one_head_counts`` (and, in chapter 12, the same counts per removal)."""

from __future__ import annotations

from statistics import NormalDist

import pandas as pd

from ...paper import values as paper_values
from .. import samples
from ..between_seeds import Share
from ..engine import CANNOT_TELL, NOT_REPRODUCED, REPRODUCED, Claim, Results, by_model, for_every, ours
from ..pooling import over_counts

CHAPTER = "03_ablating_one_head"
FEW_SHARE = 0.20  # "few heads matter alone": under this share of a model's heads significant
GAIN_LEVEL = 0.05  # the family-wise level of "some head's gain is significant" (Bonferroni over the heads)
GAIN_POWER = 0.80  # the power the gain verdict's text is stated at
COUNTS = "03_one_head_counts"


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
    return "; ".join(parts), for_every(verdicts)


def most_negligible(r: Results) -> tuple[str, str]:
    """Over 80% negligible per model; where fewer are, but the undetermined heads could still
    make it so, the model is undecided (``cannot tell``) rather than a refutation."""
    counts = ours(r[COUNTS]).groupby("model")[["heads", "negligible", "undetermined", "unplaced"]].sum()
    shares = counts["negligible"] / counts["heads"]
    could = (counts["negligible"] + counts["undetermined"]) / counts["heads"]
    text = "; ".join(
        f"{m} {int(row['negligible'])}/{int(row['heads'])} negligible, {int(row['undetermined'])} "
        f"undetermined ({int(row['unplaced'])} placed by neither test)"
        for m, row in counts.iterrows()
    )
    holds = shares > 1 - FEW_SHARE
    return text, by_model(holds, ~holds & (could > 1 - FEW_SHARE))


def some_gain(r: Results) -> tuple[str, str]:
    """Masking a head can help: some head's gain is significant with a Bonferroni correction over
    every head tested (``GAIN_LEVEL`` family-wise). The heads are scored on the same examples, so
    their tests are correlated and a count of significant gains against a binomial's chance is
    optimistic (with a correlation of 0.1 between the heads' flags it called "reproduced" 9.4% of
    the time at a nominal 5%); Bonferroni holds its level under any correlation. A head's test
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
    its standard error read off its bootstrap interval (``se``, > 0: a head whose resamples all
    agree gets the smallest error any head of its model has) and the margin δ of its model's score
    (``03_one_head_counts``' ``margin``)."""
    alpha = r.params["alpha"]
    counts = ours(r[COUNTS])
    kinds = counts.groupby("model", sort=False)["kind"].agg(set)
    margins = counts.groupby("model", sort=False)["margin"].first()
    tables = []
    for track, name in PER_HEAD.items():
        # the classifier is the model with self-attention alone; the translation model has the others
        model = next(m for m, k in kinds.items() if (k == {"self"}) == (track == "classifier"))
        table = r[name].assign(model=model)
        width = (table["delta_high"] - table["delta_low"]).clip(lower=0)
        se = width / (2 * NormalDist().inv_cdf(1 - alpha))
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


def gains_statistic(r: Results) -> dict[str, Share]:
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
        f"{paper_values.SIGNIFICANT_ENC_SELF} of 96 WMT Enc-Enc heads",
        f"reproduced: under {FEW_SHARE:.0%} of the heads significant in every model, however many of the heads "
        "placed by neither test (not significant, interval across the margin) turn out significant; partly: in "
        "some; cannot tell: where those heads could decide it either way",
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
        "8 of 96 significant (the paper tests no equivalence)",
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
        seed_statistic=gains_statistic,
        likelihood_rule="the same rule, a gain counting only beyond +δ (chapter 03's margins)",
    ),
]
