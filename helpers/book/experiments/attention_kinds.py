"""§5, which attention kind depends on its heads most (Figure 4): the translation model's heads
of one kind pruned by importance, the others left alone, on every training run."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ...heads.significance import Bootstrap
from ...sweeps.curve_spread import Spread, relative_scores
from ...sweeps.pruning_curves import heads_of, order_by_importance, prunable_share, pruning_curves
from ...zoo.scorers import translation_importance
from .. import course
from ..paper import values as paper_values
from ..profiles import Profile
from .pruning import resampled_steps


def curves(
    settings: Profile,
    name: str,
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
        curves = pruning_curves(model, orders, score, step=step, desc=f"seed {training_seed}")
        errors = at_80_errors(
            {kind: resampled_steps(model, order, score, step, bootstrap) for kind, order in orders.items()}
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
    ``pruning.resampled_steps``): per kind, the score left (``relative_80%_se``; BLEU curves) and
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
