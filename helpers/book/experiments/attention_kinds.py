"""§5, which attention kind depends on its heads most (Figure 4): the translation model's heads
of one kind pruned by importance, the others left alone, on every training run."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import pandas as pd

from ...heads.pruning_curves import heads_of, order_by_importance, prunable_share, pruning_curves
from ...zoo.scorers import translation_importance
from .. import course
from ..profiles import Profile
from ..paper import values as paper_values


def curves(settings: Profile, name: str, score: Callable, importance_set: Sequence, step: float,
           training_seeds: int = 0) -> pd.DataFrame:
    """One curve per attention kind (``kind``) of every training run of model ``name``: that
    kind's heads pruned by I_h (estimated on ``importance_set``), each step scored by ``score`` (on
    ``score.examples`` examples, recorded with ``step``); every kind's curve starts unpruned, and
    that step is scored once."""
    def run_seed(training_seed: int, run: str) -> pd.DataFrame:
        model = course.load_translation(settings, run)
        importance = translation_importance(model, importance_set)
        orders = {kind: order_by_importance(importance, heads_of(model, [kind])) for kind in paper_values.KINDS}
        curves = pruning_curves(model, orders, score, step=step, desc=f"seed {training_seed}")
        return curves.rename(columns={"order": "kind"}).assign(examples=getattr(score, "examples", None), step=step)
    return course.over_seeds(settings, name, run_seed, training_seeds)


def _at(part: pd.DataFrame, share: float) -> float:
    return part.loc[(part["share"] - share).abs().idxmin(), "score"]


def summary(all_curves: pd.DataFrame) -> pd.DataFrame:
    """Per seed and kind: BLEU unpruned, at 40% and 80% pruned, the share of it left at 80%
    (undefined for an unpruned BLEU of 0), the share prunable within 1 BLEU, and the paper's
    share left at 80% (Figure 4, read off the figure)."""
    rows = []
    for (training_seed, kind), part in all_curves.groupby(["training_seed", "kind"], sort=False):
        base = _at(part, 0.0)
        rows.append({"training_seed": training_seed, "kind": kind, "unpruned": base, "bleu_40%_pruned": _at(part, 0.4),
                     "bleu_80%_pruned": _at(part, 0.8), "relative_80%": _at(part, 0.8) / base if base else float("nan"),
                     "prunable_share_1_bleu": prunable_share(part, 1.0)})
    out = pd.DataFrame(rows)
    out["paper_relative_80%"] = out["kind"].map(paper_values.FIGURE4_BLEU_AT_80) / paper_values.WMT_BASE_BLEU
    return out


def likelihood_summary(ll_curves: pd.DataFrame) -> pd.DataFrame:
    """Per seed and kind: the log-likelihood unpruned and at 80% pruned, and the perplexity
    reached at 80% as a multiple of the unpruned model's."""
    rows = []
    for (training_seed, kind), part in ll_curves.groupby(["training_seed", "kind"], sort=False):
        base = _at(part, 0.0)
        rows.append({"training_seed": training_seed, "kind": kind, "unpruned": base, "ll_80%_pruned": _at(part, 0.8),
                     "perplexity_ratio_80%": math.exp(base - _at(part, 0.8))})
    return pd.DataFrame(rows)


def by_seed(table: pd.DataFrame, column: str, label: str) -> pd.DataFrame:
    """``column`` of a summary by kind, one column per seed named ``label, seed N``."""
    return table.pivot(index="kind", columns="training_seed", values=column).rename(columns=lambda s: f"{label}, seed {int(s)}")
