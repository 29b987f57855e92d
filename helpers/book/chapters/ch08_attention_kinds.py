"""Chapter 08, attention kinds: its experiment, the rules that judge its claims and its findings in words.

§5, which attention kind depends on its heads most (Figure 4): the translation model's heads
of one kind pruned by importance, the others left alone, on every training run.

Chapter 08's claims (§5, Figure 4): Enc-Dec attention depends on its heads most, self-attention
survives losing most of its heads. The rules read ``08_pruning_by_kind_summary``.

``findings``: chapter 08's "What this run shows" paragraph.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ...heads.gates import heads_of
from ...heads.significance import Bootstrap
from ...sweeps.curve_spread import Spread, relative_scores
from ...sweeps.pruning_curves import order_by_importance, prunable_share, pruning_curves
from ...zoo.scorers import translation_importance
from .. import course
from ..experiments.pruning_runs import resampled_steps
from ..paper import values as paper_values
from ..paper.values import HEADS_PER_KIND
from ..profiles import Profile
from ..store.results import ChapterTables
from ..verdicts import samples
from ..verdicts.between_seeds import Value, with_error
from ..verdicts.engine import (
    CANNOT_TELL,
    NOT_REPRODUCED,
    REPRODUCED,
    SHARE_TOLERANCE,
    Claim,
    Results,
    for_every,
)
from ..verdicts.pooling import Pooled, mean_over_seeds, over_interval
from ..verdicts.text import words


def curves(
    settings: Profile,
    name: str,
    *,
    score: Callable,
    importance_set: Sequence,
    step: float,
    training_seeds: int = 0,
    bootstrap: Bootstrap = Bootstrap(),
) -> pd.DataFrame:
    """One curve per attention kind (``kind``) of every training run of model ``name``: that
    kind's heads pruned by I_h (estimated on ``importance_set``), each step scored by ``score`` (on
    ``score.examples`` examples, recorded with ``step``); every kind's curve starts unpruned, and
    that step is scored once. Each row carries the bootstrap errors of ``at_80_errors``."""

    def run_seed(training_seed: int, run: str) -> pd.DataFrame:
        model = course.load_translation(settings, run)
        importance = translation_importance(model, importance_set)
        orders = {kind: order_by_importance(importance, heads_of(model, [kind])) for kind in paper_values.KINDS}
        curves = pruning_curves(model, orders, evaluate=score, step=step, desc=f"seed {training_seed}")
        errors = at_80_errors(
            {
                kind: resampled_steps(model, order, score=score, step=step, bootstrap=bootstrap)
                for kind, order in orders.items()
            }
        )
        curves = curves.rename(columns={"order": "kind"}).assign(examples=score.examples, step=step)
        for column in ("relative_80%_se", "perplexity_ratio_80%_se"):
            curves[column] = curves["kind"].map(errors[column])
        return curves.assign(**{c: errors[c] for c in MARGIN_ERRORS})

    return course.over_seeds(settings, name, run_seed, training_seeds)


MARGIN_ERRORS = ("enc_dec_relative_margin_se", "enc_dec_ratio_margin_se")


def at_80_errors(resampled: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict:
    """Bootstrap standard errors, over the scored examples, of what the summaries read at 80% of a
    kind's heads pruned, from ``{kind: (shares, resampled curves [R, steps])}`` (paired resamples,
    ``pruning_runs.resampled_steps``): per kind, the score left (``relative_80%_se``; BLEU curves) and
    the perplexity ratio (``perplexity_ratio_80%_se``; likelihood curves); and Enc-Dec's margin
    over the other kinds (``MARGIN_ERRORS``): its share left less the smallest other kind's, its
    perplexity ratio less the largest other kind's."""
    relative, ratio = {}, {}
    for kind, (shares, curves) in resampled.items():
        at = int(np.abs(shares - 0.8).argmin())
        relative[kind] = relative_scores(curves, at)
        ratio[kind] = np.exp(curves[:, 0] - curves[:, at])
    others = [k for k in resampled if k != "enc_dec"]
    out = {
        "relative_80%_se": {k: Spread.of(v).se for k, v in relative.items()},
        "perplexity_ratio_80%_se": {k: Spread.of(v).se for k, v in ratio.items()},
    }
    if "enc_dec" in resampled and others:
        out[MARGIN_ERRORS[0]] = Spread.of(relative["enc_dec"] - np.min([relative[k] for k in others], 0)).se
        out[MARGIN_ERRORS[1]] = Spread.of(ratio["enc_dec"] - np.max([ratio[k] for k in others], 0)).se
    return out


def _at(part: pd.DataFrame, share: float) -> float:
    return part.loc[(part["share"] - share).abs().idxmin(), "score"]


def _errors(part: pd.DataFrame, column: str, margin: int) -> dict[str, float]:
    """A summary row's bootstrap errors: ``column`` and Enc-Dec's margin (``MARGIN_ERRORS[margin]``),
    where the curves carry them."""
    return {c: part[c].iloc[0] for c in (column, MARGIN_ERRORS[margin]) if c in part}


def summary(all_curves: pd.DataFrame) -> pd.DataFrame:
    """Per seed and kind: BLEU unpruned, at 40% and 80% pruned, the share of it left at 80%
    (undefined for an unpruned BLEU of 0), the share prunable within 1 BLEU, and the paper's
    share left at 80% (Figure 4, read off the figure)."""
    rows = []
    for (training_seed, kind), part in all_curves.groupby(["training_seed", "kind"], sort=False):
        base = _at(part, 0.0)
        rows.append(
            {
                "training_seed": training_seed,
                "kind": kind,
                "unpruned": base,
                "bleu_40%_pruned": _at(part, 0.4),
                "bleu_80%_pruned": _at(part, 0.8),
                "relative_80%": _at(part, 0.8) / base if base else float("nan"),
                "prunable_share_1_bleu": prunable_share(part, 1.0),
                **_errors(part, "relative_80%_se", 0),
            }
        )
    out = pd.DataFrame(rows)
    out["paper_relative_80%"] = out["kind"].map(paper_values.FIGURE4_BLEU_AT_80) / paper_values.WMT_BASE_BLEU
    return out


def likelihood_summary(ll_curves: pd.DataFrame) -> pd.DataFrame:
    """Per seed and kind: the log-likelihood unpruned and at 80% pruned, and the perplexity
    reached at 80% as a multiple of the unpruned model's."""
    rows = []
    for (training_seed, kind), part in ll_curves.groupby(["training_seed", "kind"], sort=False):
        base = _at(part, 0.0)
        rows.append(
            {
                "training_seed": training_seed,
                "kind": kind,
                "unpruned": base,
                "ll_80%_pruned": _at(part, 0.8),
                "perplexity_ratio_80%": math.exp(base - _at(part, 0.8)),
                **_errors(part, "perplexity_ratio_80%_se", 1),
            }
        )
    return pd.DataFrame(rows)


def by_seed(table: pd.DataFrame, column: str, label: str) -> pd.DataFrame:
    """``column`` of a summary by kind, one column per seed named ``label, seed N``."""
    return table.pivot(index="kind", columns="training_seed", values=column).rename(
        columns=lambda s: f"{label}, seed {int(s)}"
    )


def against_paper(summary: pd.DataFrame) -> pd.DataFrame:
    """Per kind: the share of the unpruned BLEU left with 40% and with 80% of its heads pruned and
    the share prunable within 1 BLEU, a column per seed, then the paper's share left at 80%
    (Figure 4)."""
    table = summary.assign(**{"left_40%": summary["bleu_40%_pruned"] / summary["unpruned"]})
    shown = {
        "left_40%": "left at 40%",
        "relative_80%": "left at 80%",
        "prunable_share_1_bleu": "prunable within 1 BLEU",
    }
    ours = pd.concat([by_seed(table, column, label) for column, label in shown.items()], axis=1).rename_axis(
        columns=None
    )
    return ours.assign(**{"the paper, left at 80%": summary.groupby("kind")["paper_relative_80%"].first()})


CHAPTER = "08_attention_kinds"
_SUMMARY = "08_pruning_by_kind_summary"


def _kinds(r: Results) -> dict[str, pd.DataFrame]:
    """The summary's rows per attention kind, one per seed (indexed by seed)."""
    table = r[_SUMMARY]
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


def _enc_dec_most_sensitive_likelihood(r: Results) -> tuple[str, str]:
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


# the share of its BLEU a self-attention kind must keep at 80% pruned: the paper's less the tolerance
_SURVIVES = paper_values.FIGURE4_BLEU_AT_80["enc_self"] / paper_values.WMT_BASE_BLEU - SHARE_TOLERANCE


def self_attention_survives(r: Results) -> tuple[str, str]:
    """Each self-attention kind keeps at least ``_SURVIVES`` of its BLEU at 80% pruned, pooled over
    the seeds and read over its interval; reproduced for both kinds, partly for one."""
    verdicts, parts = [], []
    for kind, rows in _kinds(r).items():
        if kind == "enc_dec":
            continue
        pooled = mean_over_seeds(rows["relative_80%"].to_numpy(), rows["relative_80%_se"].to_numpy())
        verdicts.append(over_interval(lambda v: REPRODUCED if v >= _SURVIVES else NOT_REPRODUCED, pooled))
        parts.append(f"{kind} {pooled.text('{:.0%}')}")
    return ", ".join(parts) + _seeds(r), for_every(verdicts)


def _margin_statistic(r: Results) -> dict[str, Value]:
    """``enc_dec_most_sensitive``'s statistic for the between-seed test: Enc-Dec's margin over the
    other kinds at 80% pruned (its share of the BLEU left less the smallest other kind's; on the
    likelihood, its perplexity ratio less the largest other's), with the paired bootstrap's error."""
    table = r[_SUMMARY].set_index("kind")
    column, margin, pick = (
        ("perplexity_ratio_80%", "enc_dec_ratio_margin_se", max)
        if r.measure
        else ("relative_80%", "enc_dec_relative_margin_se", min)
    )
    others = table[column].drop("enc_dec")
    return {
        "Enc-Dec's margin": with_error(
            table.loc["enc_dec", column] - pick(others), table.loc["enc_dec"], column=margin, what="Enc-Dec"
        )
    }


def _survives_statistic(r: Results) -> dict[str, Value]:
    """``self_attention_survives``'s statistic: each self-attention kind's share of the BLEU left at
    80% pruned, with its bootstrap error."""
    table = r[_SUMMARY].set_index("kind").drop("enc_dec")
    return {
        kind: with_error(row["relative_80%"], row, column="relative_80%_se", what=kind)
        for kind, row in table.iterrows()
    }


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
        likelihood=_enc_dec_most_sensitive_likelihood,
        likelihood_rule="reproduced: Enc-Dec's perplexity rises the most at 80% of its heads pruned (its ratio less "
        "the largest other kind's above 0 over its whole 95% interval); not reproduced: below 0 over it",
        sample=curves_sample,
        seed_statistic=_margin_statistic,
    ),
    Claim(
        "self_attention_survives",
        "§5, Figure 4",
        "Self-attention survives losing most of its heads",
        f"about {paper_values.FIGURE4_BLEU_AT_80['enc_self']:.0f} of {paper_values.WMT_BASE_BLEU} BLEU at 80% pruned",
        "reproduced: both self-attention kinds keep at least the paper's share less "
        f"{SHARE_TOLERANCE * 100:.0f} points ({_SURVIVES:.0%} of their BLEU) over the whole 95% interval of the "
        "share pooled over the seeds; partly: one; not reproduced: neither, each interval wholly below",
        CHAPTER,
        self_attention_survives,
        sample=curves_sample,
        seed_statistic=_survives_statistic,
    ),
]


def findings(tables: ChapterTables) -> str:
    """Chapter 08's findings: per seed, the attention kind that suffers most at 80% pruned, on
    BLEU (share kept) and on the likelihood (perplexity reached), after the heads of each kind."""
    bleu = tables["08_pruning_by_kind_summary"]
    ll = tables["08_pruning_by_kind_summary_likelihood"]
    curves = tables["08_pruning_by_kind"]
    first = curves[curves["training_seed"] == curves["training_seed"].iloc[0]]
    heads = first.groupby("kind", sort=False)["pruned"].max()
    step = sorted(first["share"].unique())[1] if first["share"].nunique() > 1 else 1.0
    lines = [
        f"**The model:** {words([f'{int(n)} {k} heads' for k, n in heads.items()])} (the paper's WMT: "
        f"{HEADS_PER_KIND['WMT']} of each kind), pruned {step:.0%} of a kind at a time."
    ]
    for seed, part in bleu.groupby("training_seed"):
        kept = ", ".join(f"{k} {v:.0%}" for k, v in zip(part["kind"], part["relative_80%"]))
        worst = part.loc[part["relative_80%"].idxmin(), "kind"] if part["relative_80%"].notna().any() else "undefined"
        mine = ll[ll["training_seed"] == seed]
        ratios = ", ".join(f"{k} x{v:.2f}" for k, v in zip(mine["kind"], mine["perplexity_ratio_80%"]))
        worst_ll = (
            mine.loc[mine["perplexity_ratio_80%"].idxmax(), "kind"]
            if mine["perplexity_ratio_80%"].notna().any()
            else "undefined"
        )
        lines.append(
            f"**Seed {int(seed)}.** With 80% of a kind's heads pruned, the share of the BLEU kept is {kept} "
            f"(lowest here: {worst}). The perplexity reaches {ratios} times the unpruned model's (highest here: "
            f"{worst_ll})."
        )
    return "\n\n".join(lines)
