"""The checks of the exercises that ask a student to write part of the method: a gate, I_h, the
paired bootstrap and the pruning loop. Each check calls the student's function on a small case
and compares its numbers with the library's. It returns a line that says what matched, or raises
``ExerciseMismatch`` with what differed and a hint. Where the numbers are those of a common wrong
version (the absolute value taken per token, no per-layer normalisation, a p in a fixed
direction, heads pruned per layer...), it names that mistake. A function that raises gets its
error and the call that raised it, not a traceback into the check. It never grades style.

    from helpers.book.chapters.ch17b_write_the_method import check_gate
    check_gate(my_gate)   # my_gate(context, xi, head_dim) -> gated context

The student's edition of the exercises (``make student-edition``, otter-grader's ``otter assign``)
calls the same checks from its tests.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
import torch

_CLOSE = {"rtol": 1e-5, "atol": 1e-6}  # float32 arithmetic done in another order


class ExerciseMismatch(AssertionError):
    """The student's function gives other numbers than the library's."""


def _close(mine: torch.Tensor, other: torch.Tensor) -> bool:
    return mine.shape == other.shape and bool(torch.allclose(mine, other, **_CLOSE))


def _compare(what: str, mine, *, library, hint: str, mistakes: Mapping[str, torch.Tensor] | None = None) -> float:
    """The largest gap between ``mine`` and ``library``; raises ``ExerciseMismatch`` when they
    differ, naming the first of ``mistakes`` (description -> its numbers) that ``mine`` equals."""
    mine, library = torch.as_tensor(mine, dtype=torch.float64), torch.as_tensor(library, dtype=torch.float64)
    if mine.shape != library.shape:
        raise ExerciseMismatch(
            f"{what}: your result has shape {tuple(mine.shape)}, the library's {tuple(library.shape)}. {hint}"
        )
    gap = float((mine - library).abs().max())
    if _close(mine, library):
        return gap
    for mistake, numbers in (mistakes or {}).items():
        if _close(mine, torch.as_tensor(numbers, dtype=torch.float64)):
            raise ExerciseMismatch(f"{what}: your numbers are those of {mistake}. {hint}")
    raise ExerciseMismatch(f"{what}: your numbers differ from the library's by up to {gap:.3g}. {hint}")


def _call(function: Callable, call: str, *args):
    """``function(*args)``; an exception in it becomes an ``ExerciseMismatch`` that names the
    call (``call``, as the student would write it) and the error."""
    try:
        return function(*args)
    except ExerciseMismatch:
        raise
    except Exception as err:  # the student's code: any error is theirs to read
        raise ExerciseMismatch(f"your function raised {type(err).__name__}: {err}, when called as {call}") from None


def check_gate(gate: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor], seed: int = 0) -> str:
    """``gate(context, xi, head_dim)``: W_o's input ``context`` ``[batch, tokens, heads *
    head_dim]`` with head h's slice multiplied by ``xi[h]`` (``xi``: ``[heads]``), same shape.
    Compared with ``helpers.heads.gates.gate_heads`` on random context vectors and gates."""
    from ...heads.gates import gate_heads

    generator = torch.Generator().manual_seed(seed)
    heads, head_dim = 4, 8
    context = torch.randn(3, 5, heads * head_dim, generator=generator)
    for xi in (torch.rand(heads, generator=generator), torch.tensor([1.0, 0.0, 1.0, 0.0])):
        interleaved = (context.unflatten(-1, (head_dim, heads)) * xi).flatten(-2)  # [3, 5, 8, 4] -> [3, 5, 32]
        gap = _compare(
            "the gate",
            _call(gate, "gate(context [3, 5, 32], xi [4], head_dim=8)", context.clone(), xi.clone(), head_dim),
            library=gate_heads(context, xi[:, None], head_dim),  # xi [4, 1]: one gate per head, every example
            hint="Reshape to [batch, tokens, heads, head_dim], scale each head, and reshape back.",
            mistakes={"heads taken as interleaved columns ([head_dim, heads]), not blocks of head_dim": interleaved},
        )
    return f"ok: your gate matches gate_heads (largest gap {gap:.1e})"


def check_importance(importance: Callable[[torch.nn.Module, list, Callable], torch.Tensor], seed: int = 0) -> str:
    """``importance(model, batches, loss_fn)``: I_h of every head of a BERT-family encoder,
    ``[layers, heads]``, each layer divided by its L2 norm (paper Eq. 2, §4.1); ``loss_fn(model,
    batch)`` gives one loss per example. Compared with ``helpers.head_importance`` on a small
    random encoder and chapter 01's paraphrase loss."""
    from ...heads.importance import head_importance
    from ...zoo.demo_pairs import PairTask, paraphrase_pairs
    from ...zoo.registry import load_encoder

    model, tokenizer = load_encoder("tiny-bert", seed=seed)
    task = PairTask(tokenizer, paraphrase_pairs(12, seed=seed), batch_size=4)

    def library(**how) -> torch.Tensor:
        return head_importance(model, task.batches, loss_fn=task.loss, progress=False, **how)["self"]

    mistakes = {
        "the absolute value taken per token and summed (the authors' code), not per example (Eq. 2)": library(
            abs_per="token"
        ),
        "I_h without the per-layer normalisation: divide each layer's row by its L2 norm": library(normalize=None),
        "the absolute value per token and no per-layer normalisation": library(abs_per="token", normalize=None),
    }
    right = library()  # before the student's function, which gets a copy it may change
    mine = _call(importance, "importance(model, batches, loss_fn)", copy.deepcopy(model), task.batches, task.loss)
    gap = _compare(
        "I_h",
        mine,
        library=right,
        hint="Take each example's own gates, the absolute value of dL(x)/d xi per example (not per batch "
        "or token), average over examples, then divide each layer's row by its L2 norm.",
        mistakes=mistakes,
    )
    return f"ok: your I_h matches head_importance on {len(task.pairs)} pairs (largest gap {gap:.1e})"


def check_bootstrap(
    bootstrap: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[float, float]], seed: int = 0
) -> str:
    """``bootstrap(a, b, indices)``: the paired bootstrap of the mean score of system b against
    system a (per-example scores ``a``, ``b``: ``[N]``) over the resamples ``indices`` ``[R, N]``
    (``significance.resample_indices``); returns ``(delta, p)``: b's mean less a's on all the
    examples, and the share of resamples whose difference has the other sign. Compared with
    ``helpers.heads.significance.paired_bootstrap`` on a gain, a loss and no change."""
    from ...heads.significance import paired_bootstrap, resample_indices

    rng = np.random.default_rng(seed)
    n = 300
    a = rng.normal(0.0, 1.0, n)
    indices = resample_indices(n, 1000, seed)
    ones = np.ones(n)
    correct = rng.random(n) < 0.7  # 0/1 scores, as accuracy's: resampled differences of 0 (ties)
    flipped = correct.copy()
    flipped[np.flatnonzero(~correct)[:2]] = True  # b gets two more right: delta 2/300
    cases = [(a, a + s + rng.normal(0.0, 1.0, n)) for s in (0.2, -0.2, 0.0)] + [(correct * 1.0, flipped * 1.0)]
    got, right, mistakes = [], [], {}
    for a, b in cases:  # a gain, a loss, no change, a small gain in 0/1 scores: each mistake shows on one
        want = paired_bootstrap(
            np.stack([a, ones], 1), np.stack([b, ones], 1), score=lambda s: s[0] / s[1], indices=indices
        )
        differences = (b[indices] - a[indices]).mean(1)
        for mistake, p in {
            "a p in one fixed direction (the share of resamples where b is not above a), whatever the sign of delta": (
                differences <= 0
            ).mean(),
            "a p in one fixed direction (the share where b is not below a)": (differences >= 0).mean(),
            "the share of resamples that keep delta's sign, which is 1 - p": 1 - want.p_value,
            "ties (resamples with no difference) counted for the change, not against it": (
                np.sign(differences) == -np.sign(want.delta)
            ).mean(),
        }.items():
            mistakes.setdefault(mistake, []).append([want.delta, p])
        mine = _call(bootstrap, "bootstrap(a [300], b [300], indices [1000, 300])", a.copy(), b.copy(), indices)
        got.append([float(mine[0]), float(mine[1])])
        right.append([want.delta, want.p_value])
    _compare(
        "the bootstrap's (delta, p) on a gain, a loss, no change and 0/1 scores",
        torch.tensor(got),
        library=torch.tensor(right),
        hint="delta is mean(b) - mean(a) on every example; p is the share of resamples (rows of indices) whose "
        "mean difference has the other sign than delta.",
        mistakes={m: torch.tensor(v, dtype=torch.float64) for m, v in mistakes.items()},
    )
    return "ok: your bootstrap matches paired_bootstrap's delta and p on a gain, a loss, no change and 0/1 scores"


def check_pruning_loop(
    pruning_curve: Callable[[torch.nn.Module, torch.Tensor, Callable, float], list[float]], seed: int = 0
) -> str:
    """``pruning_curve(model, scores, evaluate, step)``: the paper's pruning loop (§4.2). Rank every
    head of the model by ``scores`` (``[layers, heads]``, normalised I_h), least important first,
    over all layers together; for k = 0, 1, ..., mask the first round(k * step * n) heads of that
    order (n: all heads) with gates and record ``evaluate(model)``. Returns the scores, one per
    step, up to every head masked. Compared with ``helpers.sweeps.pruning_curves`` on a small
    random encoder, scored by chapter 01's paraphrase loss."""
    from ...heads.importance import head_importance
    from ...sweeps import pruning_curves as curves
    from ...zoo.demo_pairs import PairTask, paraphrase_pairs
    from ...zoo.registry import load_encoder

    model, tokenizer = load_encoder("tiny-bert", seed=seed)
    task = PairTask(tokenizer, paraphrase_pairs(12, seed=seed), batch_size=4)
    scores = head_importance(model, task.batches, loss_fn=task.loss, progress=False)

    def evaluate(m: torch.nn.Module) -> float:
        with torch.no_grad():
            return float(torch.cat([task.loss(m, b) for b in task.batches]).mean())

    layers, heads = scores["self"].shape
    pool = [("self", layer, head) for layer in range(layers) for head in range(heads)]
    step = 0.125  # one head a step: an order that differs anywhere gives another curve

    def curve(order) -> list[float]:
        return curves.pruning_curve(model, order, evaluate, step=step, progress=False)["score"].tolist()

    by_layer = sorted(pool, key=lambda h: (float(scores["self"][h[1]].argsort().argsort()[h[2]]), h[1]))
    mistakes = {
        "the most important heads pruned first: sort by increasing I_h": curve(
            curves.order_by_importance(scores, pool)[::-1]
        ),
        "heads ranked within each layer, not over all layers together": curve(by_layer),
        "a random order": curve(curves.random_order(pool, seed)),
    }
    right = curve(curves.order_by_importance(scores, pool))  # before the student's function, given a copy
    call = f"pruning_curve(model, scores [layers, heads], evaluate, step={step})"
    mine = _call(pruning_curve, call, copy.deepcopy(model), scores["self"].clone(), evaluate, step)
    gap = _compare(
        "the pruning curve",
        mine,
        library=right,
        hint="Sort all heads together by I_h, least important first; at step k set the gates of the first "
        "round(k * step * n) heads to 0 (the set grows), evaluate, and go on up to every head.",
        mistakes=mistakes,
    )
    return f"ok: your pruning loop matches pruning_curves at every step (largest gap {gap:.1e})"


_FUNCTIONS = {  # the function each exercise asks for, and its check
    "my_gate": check_gate,
    "my_importance": check_importance,
    "my_bootstrap": check_bootstrap,
    "my_pruning_curve": check_pruning_loop,
}


def checks_of(namespace: dict) -> pd.DataFrame:
    """Every exercise's check run on the function of its name in ``namespace`` (a notebook's
    ``globals()``): one row per exercise, with the check's line, ``not written yet`` or what
    differed."""
    rows = []
    for name, check in _FUNCTIONS.items():
        if not callable(namespace.get(name)):
            result = "not written yet"
        else:
            try:
                result = check(namespace[name])
            except ExerciseMismatch as mismatch:
                result = str(mismatch)
        rows.append({"function": name, "check": check.__name__, "result": result})
    return pd.DataFrame(rows)
