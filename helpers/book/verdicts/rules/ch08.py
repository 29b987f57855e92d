"""Chapter 08's claims (§5, Figure 4): Enc-Dec attention depends on its heads most, self-attention
survives losing most of its heads. The rules read ``08_pruning_by_kind_summary``."""

from __future__ import annotations

import pandas as pd

from ...paper import values as paper_values
from .. import samples
from ..between_seeds import Value, with_error
from ..engine import CANNOT_TELL, NOT_REPRODUCED, REPRODUCED, SHARE_TOLERANCE, Claim, Results, for_every
from ..pooling import Pooled, mean_over_seeds, over_interval

CHAPTER = "08_attention_kinds"
SUMMARY = "08_pruning_by_kind_summary"


def _kinds(r: Results) -> dict[str, pd.DataFrame]:
    """The summary's rows per attention kind, one per seed (indexed by seed)."""
    table = r[SUMMARY]
    seed = table["training_seed"] if "training_seed" in table else pd.Series(0, index=table.index)
    return {k: part.set_index(seed[part.index]) for k, part in table.groupby("kind", sort=False)}


def _seeds(r: Results) -> str:
    return f" ({len(r.seeds)} seeds pooled)" if len(r.seeds) > 1 else ""


def _margin(r: Results, column: str, error: str, pick) -> Pooled:
    """Enc-Dec's ``column`` less the extreme (``pick``) of the other kinds', per seed, pooled with
    the paired bootstrap's error of that margin (``error``)."""
    kinds = _kinds(r)
    others = pd.concat([v[column] for k, v in kinds.items() if k != "enc_dec"], axis=1)
    extreme = others.max(axis=1) if pick is max else others.min(axis=1)
    enc_dec = kinds["enc_dec"]
    return mean_over_seeds((enc_dec[column] - extreme).to_numpy(), enc_dec[error].to_numpy())


def enc_dec_most_sensitive_likelihood(r: Results) -> tuple[str, str]:
    """Enc-Dec's perplexity rises the most at 80% of its heads pruned: its ratio less the largest
    other kind's, pooled over the seeds, above 0 over the whole interval (below: refuted)."""
    means = {k: float(v["perplexity_ratio_80%"].mean()) for k, v in _kinds(r).items()}
    margin = _margin(r, "perplexity_ratio_80%", "enc_dec_ratio_margin_se", max)
    verdict = over_interval(lambda v: REPRODUCED if v > 0 else NOT_REPRODUCED, margin)
    text = ", ".join(f"{k} x{v:.2f}" for k, v in means.items()) + " perplexity at 80% pruned"
    return f"{text}; Enc-Dec's margin {margin.text('{:+.2f}')}{_seeds(r)}", verdict


def enc_dec_most_sensitive(r: Results) -> tuple[str, str]:
    """Enc-Dec keeps the smallest share of its BLEU at 80% pruned: its share less the smallest
    other kind's, pooled over the seeds, below 0 over the whole interval (above: refuted). An
    unpruned BLEU of 0 leaves no share to keep: cannot tell."""
    means = {k: float(v["relative_80%"].mean(skipna=False)) for k, v in _kinds(r).items()}  # a NaN seed: NaN
    text = ", ".join(f"{k} {v:.0%}" for k, v in means.items()) + " of the BLEU left at 80% pruned"
    if any(v != v for v in means.values()):  # an unpruned BLEU of 0: no share of it to keep
        return text, CANNOT_TELL
    margin = _margin(r, "relative_80%", "enc_dec_relative_margin_se", min)
    verdict = over_interval(lambda v: REPRODUCED if v < 0 else NOT_REPRODUCED, margin)
    return f"{text}; Enc-Dec's margin {margin.text('{:+.0%}')}{_seeds(r)}", verdict


def self_attention_survives(r: Results) -> tuple[str, str]:
    """Each self-attention kind keeps at least the paper's share less ``SHARE_TOLERANCE`` of its
    BLEU at 80% pruned, pooled over the seeds and read over its interval; reproduced for both
    kinds, partly for one."""
    paper = paper_values.FIGURE4_BLEU_AT_80["enc_self"] / paper_values.WMT_BASE_BLEU
    verdicts, parts = [], []
    for kind, rows in _kinds(r).items():
        if kind == "enc_dec":
            continue
        pooled = mean_over_seeds(rows["relative_80%"].to_numpy(), rows["relative_80%_se"].to_numpy())
        verdicts.append(
            over_interval(lambda v: REPRODUCED if v >= paper - SHARE_TOLERANCE else NOT_REPRODUCED, pooled)
        )
        parts.append(f"{kind} {pooled.text('{:.0%}')}")
    return ", ".join(parts) + _seeds(r), for_every(verdicts)


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
        "reproduced: Enc-Dec keeps the smallest share of its BLEU at 80% of its heads pruned (its share less the "
        "smallest other kind's, pooled over the seeds, below 0 over its whole 95% interval); not reproduced: above 0 "
        "over it; cannot tell: otherwise, or no unpruned BLEU to keep a share of",
        CHAPTER,
        enc_dec_most_sensitive,
        likelihood=enc_dec_most_sensitive_likelihood,
        likelihood_rule="reproduced: Enc-Dec's perplexity rises the most at 80% of its heads pruned (its ratio less "
        "the largest other kind's above 0 over its whole 95% interval); not reproduced: below 0 over it",
        sample=curves_sample,
        seed_statistic=margin_statistic,
    ),
    Claim(
        "self_attention_survives",
        "§5, Figure 4",
        "Self-attention survives losing most of its heads",
        f"about {paper_values.FIGURE4_BLEU_AT_80['enc_self']:.0f} of {paper_values.WMT_BASE_BLEU} BLEU at 80% pruned",
        f"reproduced: both self-attention kinds keep at least the paper's share less {SHARE_TOLERANCE:.0%} over the "
        "whole 95% interval of the share pooled over the seeds; partly: one; not reproduced: neither, each interval "
        "wholly below",
        CHAPTER,
        self_attention_survives,
        sample=curves_sample,
        seed_statistic=survives_statistic,
    ),
]
