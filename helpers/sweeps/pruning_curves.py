"""Greedy head pruning curves (paper §4.2, §5, §6 and Appendix B; Figures 3 to 6).

Heads are put in an order, least useful first, and the model is scored with the first 0%, 10%,
..., 90% and 100% of them masked (cumulative, nothing retrained). The orders:

* ``order_by_importance``: increasing importance I_h (computed once; §4.1, per-layer L2
  normalised by ``head_importance``), the paper's solid line;
* ``order_by_ablation``: decreasing score after masking the head alone (§3.2's deltas), the
  paper's dashed "individual oracle" line;
* ``random_order``: a shuffle, for a band over seeds;
* ``reestimated_curve`` re-computes I_h with the heads pruned so far masked before each step
  (the authors' ``--exact_pruning`` option).

Steps count heads of the whole pool (all heads, or one attention kind for §5): step k masks
``round(k * step * n)`` heads. Masking is through ``HeadGates``; a zero gate is the same as
removing the head (tested in tests/test_pruning.py), so the curves hold for physical pruning.
The library's scorers (``zoo.scorers``, ``zoo.causal_lm.PerplexityScorer``) score a step on a
CPU with its heads physically removed (``ablation.pruned_passes``), which costs less arithmetic
and gives the gated score up to float rounding.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ..base import ledger
from ..heads.gates import Head, HeadGates, HeadSpec, heads_in, spec_of
from ..heads.sites import explicit_attention

Evaluate = Callable[[nn.Module], float]


def order_by_importance(scores: dict[str, torch.Tensor], pool: Sequence[Head]) -> list[Head]:
    """``pool`` sorted by increasing importance (``scores[kind][layer, head]``); ties keep pool order."""
    return sorted(pool, key=lambda h: float(scores[h[0]][h[1], h[2]]))


def order_by_ablation(effects: pd.DataFrame, pool: Sequence[Head]) -> list[Head]:
    """``pool`` sorted by decreasing score change when the head is masked alone (§3.2's one-head
    ``effects``: columns kind, layer, head, delta): the head whose removal hurts least goes first."""
    delta = {
        (k, int(layer), int(h)): float(d)
        for k, layer, h, d in zip(effects["kind"], effects["layer"], effects["head"], effects["delta"])
    }
    missing = [h for h in pool if h not in delta]
    if missing:
        raise ValueError(
            f"the one-head effects have no delta for {len(missing)} heads of the pool, e.g. {missing[0]}; "
            "run the one-head ablation on every head first"
        )
    return sorted(pool, key=lambda h: -delta[h])


def random_order(pool: Sequence[Head], seed: int) -> list[Head]:
    """``pool`` shuffled with ``random.Random(seed)``: a random order, the baseline for the other two."""
    order = list(pool)
    random.Random(seed).shuffle(order)
    return order


def counts(n: int, step: float = 0.1) -> list[int]:
    """Heads masked at each step: round(k * step * n) for k = 0, 1, ... up to all ``n``."""
    steps = round(1 / step)
    return sorted({round(k * n / steps) for k in range(steps + 1)})


def pruning_curve(
    model: nn.Module,
    order: Sequence[Head],
    evaluate: Evaluate,
    step: float = 0.1,
    progress: bool = True,
    desc: str = "pruning curve",
) -> pd.DataFrame:
    """Score with the first ``count`` heads of ``order`` masked, for every step.

    When ``evaluate`` has an attribute ``many`` (``many(model, specs) -> [score, ...]``, one score
    per head spec, as ``zoo.scorers.translation_scorer`` gives), all steps are scored in one call,
    which may put several of them in one pass; the scores are the same.
    Returns one row per step: ``pruned`` (heads masked), ``share`` (of ``order``, 0..1), ``score``.
    """
    curve = pruning_curves(model, {"": order}, evaluate=evaluate, step=step, progress=progress, desc=desc)
    return curve.drop(columns="order")


def pruning_curves(
    model: nn.Module,
    orders: Mapping[str, Sequence[Head]],
    *,
    evaluate: Evaluate,
    step: float = 0.1,
    progress: bool = True,
    desc: str = "pruning curves",
) -> pd.DataFrame:
    """``pruning_curve`` for each order of ``orders`` (label -> order), one after the other, with
    the label in an ``order`` column (after ``pruned``, ``share`` and ``score``). A set of heads that
    several curves mask is scored once: every curve's first step (none), and the last step (all)
    of curves over one pool, such as the importance order and its random baselines."""
    steps = {label: counts(len(order), step) for label, order in orders.items()}
    specs = [spec_of(order[:count]) for label, order in orders.items() for count in steps[label]]
    scores = iter(score_specs(model, specs, evaluate=evaluate, progress=progress, desc=desc))
    return pd.DataFrame(
        [
            {"pruned": count, "share": count / len(order), "score": next(scores), "order": label}
            for label, order in orders.items()
            for count in steps[label]
        ],
        columns=["pruned", "share", "score", "order"],
    )


def score_specs(
    model: nn.Module,
    specs: Sequence[HeadSpec],
    *,
    evaluate: Evaluate,
    progress: bool = True,
    desc: str = "pruning curve",
) -> list[float]:
    """``evaluate(model)`` with the heads of each spec masked (``{kind: {layer: [heads]}}``, as
    ``spec_of`` gives), in order; specs that mask the same heads are scored once. With
    ``evaluate.many`` (see ``pruning_curve``) every distinct spec is scored in one call."""
    firsts: dict[frozenset, HeadSpec] = {}
    for spec in specs:
        firsts.setdefault(heads_in(spec), spec)
    many = getattr(evaluate, "many", None)
    with ledger.entry(ledger.CONTAINER, desc, model=model, configs=len(firsts)):
        if many is not None:
            scores = [float(s) for s in many(model, list(firsts.values()))]
        else:
            scores = []
            with explicit_attention(model), HeadGates(model) as gates:
                for spec in tqdm(firsts.values(), desc=desc, disable=not progress, unit="step"):
                    gates.reset()
                    if spec:
                        gates.mask(spec)
                    scores.append(float(evaluate(model)))
    by_heads = dict(zip(firsts, scores))
    return [by_heads[heads_in(spec)] for spec in specs]


def reestimated_curve(
    model: nn.Module,
    pool: Sequence[Head],
    *,
    importance: Callable[[nn.Module, HeadGates], dict],
    evaluate: Evaluate,
    step: float = 0.1,
    progress: bool = True,
) -> tuple[pd.DataFrame, list[Head]]:
    """Like ``pruning_curve`` with ``order_by_importance``, but before each step I_h is computed
    again (``importance(model, gates)``, e.g. ``head_importance(..., gates=gates)``) with the
    heads pruned so far masked, and the next heads are the least important of those left.

    Returns the curve and the order in which heads were pruned.
    """
    order: list[Head] = []
    rows = []
    with explicit_attention(model), HeadGates(model) as gates:
        for count in tqdm(
            counts(len(pool), step), desc="pruning curve (re-estimated)", disable=not progress, unit="step"
        ):
            if count > len(order):
                done = set(order)
                left = [h for h in pool if h not in done]
                order += order_by_importance(importance(model, gates), left)[: count - len(order)]
                gates.reset()
                gates.mask(spec_of(order))
            rows.append({"pruned": count, "share": count / len(pool), "score": float(evaluate(model))})
    return pd.DataFrame(rows), order


def prunable_share(curve: pd.DataFrame, tolerance: float) -> float:
    """The largest share such that every step up to it keeps ``score >= unpruned - tolerance``
    (the paper's "no noticeable loss": 1 BLEU point, or 1% accuracy as 0.01)."""
    base = float(curve.loc[curve["pruned"] == 0, "score"].iloc[0])
    share = 0.0
    for s, score in zip(curve["share"], curve["score"]):
        if score < base - tolerance:
            break
        share = float(s)
    return share
