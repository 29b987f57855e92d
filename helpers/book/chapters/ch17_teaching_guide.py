"""The teaching guide's checks: a student writes part of the method (a gate, I_h, the paired
bootstrap) as a function, and one call compares it with the library on a small case. Each check
returns a line that says what matched, or raises ``ExerciseMismatch`` with what differed and a
hint; it never grades style, only numbers.

    from helpers.book.chapters.ch17_teaching_guide import check_gate
    check_gate(my_gate)   # my_gate(context, xi, head_dim) -> gated context

The checks are small functions rather than an autograder (otter-grader's ``grader.check``): each
exercise has one right answer, the library's own numbers, so a comparison with them is the whole
test, and a student runs it in any notebook with no test files or configuration.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

_CLOSE = {"rtol": 1e-5, "atol": 1e-6}  # float32 arithmetic done in another order


class ExerciseMismatch(AssertionError):
    """The student's function gives other numbers than the library's."""


def _compare(what: str, mine: torch.Tensor, library: torch.Tensor, hint: str) -> float:
    mine, library = torch.as_tensor(mine, dtype=torch.float64), torch.as_tensor(library, dtype=torch.float64)
    if mine.shape != library.shape:
        raise ExerciseMismatch(
            f"{what}: your result has shape {tuple(mine.shape)}, the library's {tuple(library.shape)}. {hint}"
        )
    gap = float((mine - library).abs().max())
    if not torch.allclose(mine, library, **_CLOSE):
        raise ExerciseMismatch(f"{what}: your numbers differ from the library's by up to {gap:.3g}. {hint}")
    return gap


def check_gate(gate: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor], seed: int = 0) -> str:
    """``gate(context, xi, head_dim)``: W_o's input ``context`` ``[batch, tokens, heads *
    head_dim]`` with head h's slice multiplied by ``xi[h]`` (``xi``: ``[heads]``), same shape.
    Compared with ``helpers.heads.gates.gate_heads`` on random context vectors and gates."""
    from ...heads.gates import gate_heads

    generator = torch.Generator().manual_seed(seed)
    heads, head_dim = 4, 8
    context = torch.randn(3, 5, heads * head_dim, generator=generator)
    for xi in (torch.rand(heads, generator=generator), torch.tensor([1.0, 0.0, 1.0, 0.0])):
        gap = _compare(
            "the gate",
            gate(context.clone(), xi.clone(), head_dim),
            gate_heads(context, xi[:, None], head_dim),
            "Reshape to [batch, tokens, heads, head_dim], scale each head, and reshape back.",
        )
    return f"your gate matches gate_heads (largest gap {gap:.1e})"


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
    library = head_importance(model, task.batches, task.loss, normalize="layer", progress=False)["self"]
    gap = _compare(
        "I_h",
        importance(model, task.batches, task.loss),
        library,
        "Take each example's own gates, the absolute value of dL(x)/d xi per example (not per batch), "
        "average over examples, then divide each layer's row by its L2 norm.",
    )
    return f"your I_h matches head_importance on {len(task.pairs)} pairs (largest gap {gap:.1e})"


def check_bootstrap(
    bootstrap: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[float, float]], seed: int = 0
) -> str:
    """``bootstrap(a, b, indices)``: the paired bootstrap of the mean score of system b against
    system a (per-example scores ``a``, ``b``: ``[N]``) over the resamples ``indices`` ``[R, N]``
    (``significance.resample_indices``); returns ``(delta, p)``: b's mean less a's on all the
    examples, and the share of resamples whose difference has the other sign. Compared with
    ``helpers.heads.significance.paired_bootstrap`` on a change that is real and on one that is not."""
    from ...heads.significance import paired_bootstrap, resample_indices

    rng = np.random.default_rng(seed)
    n = 300
    a = rng.normal(0.0, 1.0, n)
    indices = resample_indices(n, 1000, seed)
    ones = np.ones(n)
    for shift in (0.2, 0.0):
        b = a + shift + rng.normal(0.0, 1.0, n)
        want = paired_bootstrap(np.stack([a, ones], 1), np.stack([b, ones], 1), lambda s: s[0] / s[1], indices)
        got = bootstrap(a.copy(), b.copy(), indices)
        _compare(
            "the bootstrap's (delta, p)",
            torch.tensor([float(got[0]), float(got[1])]),
            torch.tensor([want.delta, want.p_value]),
            "delta is mean(b) - mean(a) on every example; p is the share of resamples (rows of indices) whose "
            "mean difference has the other sign than delta.",
        )
    return "your bootstrap matches paired_bootstrap's delta and p on a real change and on no change"


# the solution blocks of the guide (sphinx-exercise), each checked by the page that shows it
_SOLUTION = re.compile(r"````\{solution\} (ex-[a-z]+)\n.*?```python\n(.*?)```\n````", re.S)
_CHECKS = {
    "ex-gate": ("my_gate", check_gate),
    "ex-importance": ("my_importance", check_importance),
    "ex-bootstrap": ("my_bootstrap", check_bootstrap),
}


def solution_checks(markdown: list[str]) -> pd.DataFrame:
    """Each solution block in ``markdown`` (the guide's cells) run through its exercise's check:
    one row per solution (exercise, check, result: the check's line, or ``FAILED:`` and why)."""
    rows = []
    for text in markdown:
        for label, code in _SOLUTION.findall(text):
            name, check = _CHECKS[label]
            namespace: dict = {}
            exec(code, namespace)  # the guide's own solution, as the page shows it
            try:
                result = check(namespace[name])
            except ExerciseMismatch as err:
                result = f"FAILED: {err}"
            rows.append({"exercise": label, "check": check.__name__, "result": result})
    return pd.DataFrame(rows, columns=["exercise", "check", "result"])
