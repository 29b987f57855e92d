"""Chapter 08's claims (§5, Figure 4): Enc-Dec attention depends on its heads most, self-attention
survives losing most of its heads. The rules read ``08_pruning_by_kind_summary``."""

from __future__ import annotations

from ...paper import values as paper_values
from .. import samples
from ..between_seeds import Value, with_error
from ..engine import NOT_REPRODUCED, SHARE_TOLERANCE, Claim, Results, three_way

CHAPTER = "08_attention_kinds"
SUMMARY = "08_pruning_by_kind_summary"


def enc_dec_most_sensitive_likelihood(r: Results) -> tuple[str, str]:
    table = r[SUMMARY].set_index("kind")["perplexity_ratio_80%"]
    text = ", ".join(f"{k} x{v:.2f}" for k, v in table.items())
    return text + " perplexity at 80% pruned", three_way(table.idxmax() == "enc_dec", False)


def enc_dec_most_sensitive(r: Results) -> tuple[str, str]:
    table = r[SUMMARY].set_index("kind")["relative_80%"]
    text = ", ".join(f"{k} {v:.0%}" for k, v in table.items())
    if table.isna().all():  # an unpruned BLEU of 0: no share of it to keep
        return text + " of the BLEU left at 80% pruned", NOT_REPRODUCED
    return text + " of the BLEU left at 80% pruned", three_way(table.idxmin() == "enc_dec", False)


def self_attention_survives(r: Results) -> tuple[str, str]:
    table = r[SUMMARY].set_index("kind")["relative_80%"].drop("enc_dec")
    paper = paper_values.FIGURE4_BLEU_AT_80["enc_self"] / paper_values.WMT_BASE_BLEU
    kept = table >= paper - SHARE_TOLERANCE
    return ", ".join(f"{k} {v:.0%}" for k, v in table.items()), three_way(kept.all(), kept.any())


def margin_statistic(r: Results) -> dict[str, Value]:
    """``enc_dec_most_sensitive``'s statistic for the between-seed test: Enc-Dec's margin over the
    other kinds at 80% pruned (its share of the BLEU left less the smallest other kind's; on the
    likelihood, its perplexity ratio less the largest other's), with the paired bootstrap's error."""
    table = r[SUMMARY].set_index("kind")
    column, margin, pick = (
        ("perplexity_ratio_80%", "enc_dec_ratio_margin_se", max)
        if r.measure
        else ("relative_80%", "enc_dec_relative_margin_se", min)
    )
    others = table[column].drop("enc_dec")
    return {
        "Enc-Dec's margin": with_error(
            table.loc["enc_dec", column] - pick(others), table.loc["enc_dec"], margin, "Enc-Dec"
        )
    }


def survives_statistic(r: Results) -> dict[str, Value]:
    """``self_attention_survives``'s statistic: each self-attention kind's share of the BLEU left at
    80% pruned, with its bootstrap error."""
    table = r[SUMMARY].set_index("kind").drop("enc_dec")
    return {kind: with_error(row["relative_80%"], row, "relative_80%_se", kind) for kind, row in table.iterrows()}


def curves_sample(r: Results) -> str:
    return samples.curves(r["08_pruning_by_kind"], what="shares of each kind's heads")


CLAIMS = [
    Claim(
        "enc_dec_most_sensitive",
        "§5, Figure 4",
        "Enc-Dec attention depends on its heads most",
        "Enc-Dec collapses past 60% pruned",
        "reproduced: Enc-Dec keeps the smallest share of its BLEU at 80% of its heads pruned",
        CHAPTER,
        enc_dec_most_sensitive,
        likelihood=enc_dec_most_sensitive_likelihood,
        likelihood_rule="reproduced: Enc-Dec's perplexity rises the most at 80% of its heads pruned",
        sample=curves_sample,
        seed_statistic=margin_statistic,
    ),
    Claim(
        "self_attention_survives",
        "§5, Figure 4",
        "Self-attention survives losing most of its heads",
        f"about {paper_values.FIGURE4_BLEU_AT_80['enc_self']:.0f} of {paper_values.WMT_BASE_BLEU} BLEU at 80% pruned",
        f"reproduced: both self-attention kinds keep at least the paper's share less {SHARE_TOLERANCE:.0%}; "
        "partly: one",
        CHAPTER,
        self_attention_survives,
        sample=curves_sample,
        seed_statistic=survives_statistic,
    ),
]
