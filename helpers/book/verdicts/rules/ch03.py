"""Chapter 03's claims (§3.2, Table 1): few heads matter alone, most can go alone, masking one can
help. The rules read ``03_one_head_counts`` (and, in chapter 12, the same counts per removal)."""

from __future__ import annotations

from ...paper import values as paper_values
from .. import samples
from ..between_seeds import Share
from ..engine import CANNOT_TELL, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, Results, by_model, ours

CHAPTER = "03_ablating_one_head"
FEW_SHARE = 0.20  # "few heads matter alone": under this share of a model's heads significant
UNDERPOWERED = (
    0.50  # a model's one-head tests "cannot tell" when more than this share of its heads is placed by neither test
)
GAIN_LEVEL = 0.05  # significant gains count as real when more than chance gives (one-sided binomial p below this)
GAIN_POWER = 0.80  # the power the gain verdict's text is stated at
COUNTS = "03_one_head_counts"


def few_significant(r: Results) -> tuple[str, str]:
    """Few heads significant means little where the tests place few heads at all: a model whose
    heads are mostly placed by neither test (not significant, interval across the margin) is
    undecided, not a model where few heads matter."""
    table = ours(r[COUNTS])
    columns = ["heads", "significant"] + (["unplaced"] if "unplaced" in table else [])
    counts = table.groupby("model")[columns].sum()
    shares = counts["significant"] / counts["heads"]
    unplaced = counts["unplaced"] / counts["heads"] if "unplaced" in counts else shares * 0
    underpowered = unplaced > UNDERPOWERED
    text = "; ".join(
        f"{m} {int(row['significant'])}/{int(row['heads'])}"
        + (f" ({int(row['unplaced'])} placed by neither test)" if underpowered[m] else "")
        for m, row in counts.iterrows()
    )
    return text, by_model((shares < FEW_SHARE) & ~underpowered, (shares < FEW_SHARE) & underpowered)


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
    """Masking a head can help, judged against chance. A test at alpha flags a gain in about alpha
    of the heads with no effect (one direction), so among hundreds of heads a few significant
    gains are what chance gives: the gains must outnumber it (one-sided binomial, ``GAIN_LEVEL``).
    The text states what the count test can see: the gains it needs, and how many heads that
    truly help (each flagged) it finds with ``GAIN_POWER`` (``heads_found_with_power``). On the
    likelihood a gain must also lie beyond +δ (``helpful``); a head whose true change is +δ is
    called so at most alpha of the time, so the helpful heads are held to the same binomial
    test, which corrects for the number of heads."""
    from ....heads.significance import chance_flag_rate

    counts = ours(r[COUNTS])
    up, heads = int(counts["significant_up"].sum()), int(counts["heads"].sum())
    rate = chance_flag_rate(r.params["alpha"], one_direction=True)
    needed = gains_needed(heads, rate)
    text = (
        f"{up} of {int(counts['significant'].sum())} significant changes are gains; chance gives {rate * heads:.1f}, "
        f"the test needs {needed} (it finds {heads_found_with_power(heads, rate)} truly helping heads with "
        f"{GAIN_POWER:.0%} power)"
    )
    gains = gain_verdict(up, heads, rate)
    if not r.measure:
        return text, gains
    helpful = int(counts["helpful"].sum())
    beyond = gain_verdict(helpful, heads, rate)
    verdict = REPRODUCED if beyond == REPRODUCED else PARTLY if gains == REPRODUCED else gains
    return f"{helpful} gains beyond δ (the test needs {needed}); {text}", verdict


def gain_verdict(gains: int, heads: int, rate: float) -> str:
    """Reproduced when ``gains`` among ``heads`` outnumber chance (``rate`` each) at ``GAIN_LEVEL``;
    cannot tell when they exceed chance's expectation but not significantly; else not reproduced."""
    from scipy.stats import binom

    if gains and binom.sf(gains - 1, heads, rate) < GAIN_LEVEL:
        return REPRODUCED
    return CANNOT_TELL if gains > rate * heads else NOT_REPRODUCED


def gains_needed(heads: int, rate: float) -> int:
    """The fewest gains among ``heads`` that the binomial test calls more than chance."""
    from scipy.stats import binom

    return int(binom.isf(GAIN_LEVEL, heads, rate)) + 1


def heads_found_with_power(heads: int, rate: float) -> int:
    """The fewest heads that truly help (each flagged as a gain) for which the count of gains
    reaches ``gains_needed`` with probability ``GAIN_POWER``, the other heads flagged by chance."""
    from scipy.stats import binom

    needed = gains_needed(heads, rate)
    return next(m for m in range(needed + 1) if binom.sf(needed - m - 1, heads - m, rate) >= GAIN_POWER)


def shares_of(column: str, per_model: bool = True):
    """A claim's statistic for the between-seed test: ``column`` of the heads, per model (or
    pooled), as ``Share``s."""

    def statistic(r: Results) -> dict[str, Share]:
        table = ours(r[COUNTS]).assign(all="all heads")
        counts = table.groupby("model" if per_model else "all")[["heads", column]].sum()
        return {f"{m}: {column}": Share(int(row[column]), int(row["heads"])) for m, row in counts.iterrows()}

    return statistic


def gains_statistic(r: Results) -> dict[str, Share]:
    """``some_gain``'s statistic: the significant gains (on the likelihood, the gains beyond δ)
    among all the heads."""
    return shares_of("helpful" if r.measure else "significant_up", per_model=False)(r)


def counts_sample(r: Results) -> str:
    return samples.one_head(r[COUNTS])


CLAIMS = [
    Claim(
        "few_significant",
        "§3.2, Table 1",
        "Few heads matter alone: masking one changes the score significantly for a minority",
        f"{paper_values.SIGNIFICANT_ENC_SELF} of 96 WMT Enc-Enc heads",
        f"reproduced: under {FEW_SHARE:.0%} of the heads significant in every model; partly: in some; cannot tell: "
        f"where it holds, over {UNDERPOWERED:.0%} of the heads are placed by neither test (too little power to call "
        "few significant)",
        CHAPTER,
        few_significant,
        likelihood=True,
        sample=counts_sample,
        seed_statistic=shares_of("significant"),
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
        seed_statistic=shares_of("negligible"),
    ),
    Claim(
        "some_gain",
        "§3.2, Table 1",
        "Masking a head can improve the score",
        f"{paper_values.SIGNIFICANT_ENC_SELF_UP} of the {paper_values.SIGNIFICANT_ENC_SELF} significant changes are "
        "gains",
        "reproduced: more significant gains than chance gives at alpha in that direction (binomial p < "
        f"{GAIN_LEVEL}); "
        "cannot tell: more than chance expects, not significantly; not reproduced: no more than chance expects",
        CHAPTER,
        some_gain,
        likelihood=True,
        sample=counts_sample,
        parameters={"alpha": 0.01},
        seed_statistic=gains_statistic,
        likelihood_rule=f"reproduced: more gains beyond +δ (chapter 03's margins) than chance gives (binomial p < "
        f"{GAIN_LEVEL}, a correction for the number of heads); partly: only the significant gains outnumber chance; "
        "otherwise as on the paper's metric",
    ),
]
