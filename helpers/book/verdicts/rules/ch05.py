"""Chapter 05's claim (§3.4, Figure 2): a head's effect in domain predicts its effect out of
domain. The rule reads ``05_cross_domain_r``."""

from __future__ import annotations

from ...paper import values as paper_values
from .. import samples
from ..between_seeds import Value, fisher_z
from ..engine import Claim, Results, three_way

CHAPTER = "05_cross_domain"
STRONG_R = 0.40  # "effects in domain predict effects out of domain": Pearson r at least this
LEVEL = 0.01  # ... with p below this


def cross_domain(r: Results) -> tuple[str, str]:
    table = r["05_cross_domain_r"]
    pooled = table[table["kind"].isin(["all", "self"])]
    strong = (pooled["pearson_r"] >= STRONG_R) & (pooled["p_value"] < LEVEL)
    text = "; ".join(f"{m} r = {v:.2f}" for m, v in zip(pooled["model"], pooled["pearson_r"]))
    return text, three_way(strong.all(), strong.any())


def correlation_statistic(r: Results) -> dict[str, Value]:
    """The pooled r of each model as Fisher's z over its heads (the between-seed test)."""
    table = r["05_cross_domain_r"]
    pooled = table[table["kind"].isin(["all", "self"])]
    return {
        str(m): fisher_z(float(v), int(n)) for m, v, n in zip(pooled["model"], pooled["pearson_r"], pooled["heads"])
    }


CLAIMS = [
    Claim(
        "cross_domain",
        "§3.4, Figure 2",
        "A head's effect in domain predicts its effect out of domain",
        f"r = {paper_values.CROSS_DOMAIN_R['translation']} (WMT), {paper_values.CROSS_DOMAIN_R['classifier']} (BERT)",
        f"reproduced: r >= {STRONG_R} with p < {LEVEL} for every model; partly: for one",
        CHAPTER,
        cross_domain,
        likelihood=True,
        sample=lambda r: samples.correlation(r["05_cross_domain_r"], LEVEL),
        seed_statistic=correlation_statistic,
    ),
]
