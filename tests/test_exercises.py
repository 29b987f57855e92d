"""The teaching guide's checks pass a right answer and explain a wrong one (chapters/ch17_teaching_guide.py)."""

import numpy as np
import pytest
import torch

from helpers.book.chapters.ch17_teaching_guide import ExerciseMismatch, check_bootstrap, check_gate, check_importance


def right_gate(context, xi, head_dim):
    per_head = context.unflatten(-1, (-1, head_dim))  # [batch, tokens, heads, head_dim]
    return (per_head * xi[:, None]).flatten(-2)


def _gated_by(xi, head_dim):  # a W_o pre-hook: xi [examples, heads]
    return lambda module, args: (args[0].unflatten(-1, (-1, head_dim)) * xi[:, None, :, None]).flatten(-2)


def right_importance(model, batches, loss_fn):
    from helpers import attention_sites

    sites = attention_sites(model)
    total, examples = 0, 0
    for batch in batches:
        xi = torch.ones(len(batch), len(sites), sites[0].num_heads, requires_grad=True)
        hooks = [s.output.register_forward_pre_hook(_gated_by(xi[:, s.layer], s.head_dim)) for s in sites]
        losses = loss_fn(model, batch)
        for h in hooks:
            h.remove()
        (grad,) = torch.autograd.grad(losses.sum(), xi)
        total, examples = total + grad.abs().sum(0).double(), examples + len(losses)
    scores = total / examples
    return scores / scores.norm(dim=-1, keepdim=True)


def right_bootstrap(a, b, indices):
    delta = b.mean() - a.mean()
    resampled = b[indices].mean(1) - a[indices].mean(1)
    return delta, float(np.mean(np.sign(resampled) != np.sign(delta)))


def test_a_right_answer_passes_each_check():
    assert check_gate(right_gate).startswith("your gate matches gate_heads")
    assert check_importance(right_importance).startswith("your I_h matches head_importance")
    assert check_bootstrap(right_bootstrap).startswith("your bootstrap matches paired_bootstrap")


def test_a_wrong_answer_is_explained():
    with pytest.raises(ExerciseMismatch, match="the gate: your numbers differ.*Reshape"):
        check_gate(lambda context, xi, head_dim: context * xi.mean())
    with pytest.raises(ExerciseMismatch, match="has shape"):
        check_gate(lambda context, xi, head_dim: context[..., :head_dim])

    def per_token(model, batches, loss_fn):  # the absolute value per token (the authors' code), not per example
        from helpers import head_importance

        return head_importance(model, batches, loss_fn, abs_per="token", progress=False)["self"]

    with pytest.raises(ExerciseMismatch, match="I_h: your numbers differ.*per example"):
        check_importance(per_token)
    with pytest.raises(ExerciseMismatch, match="other sign"):
        check_bootstrap(lambda a, b, indices: (b.mean() - a.mean(), 0.5))


def test_every_solution_the_guide_shows_passes_its_check():
    import nbformat

    from helpers.book.chapters.ch17_teaching_guide import solution_checks
    from helpers.book.running.runner import NOTEBOOKS

    guide = nbformat.read(NOTEBOOKS / "17_teaching_guide.ipynb", as_version=4)
    checked = solution_checks([c.source for c in guide.cells if c.cell_type == "markdown"])
    assert list(checked["exercise"]) == ["ex-gate", "ex-importance", "ex-bootstrap"]
    assert checked["result"].str.startswith("your ").all(), checked["result"].tolist()
    wrong = solution_checks(
        ["````{solution} ex-gate\n:class: dropdown\n\n```python\ndef my_gate(c, xi, d):\n    return c\n```\n````"]
    )
    assert wrong["result"].iloc[0].startswith("FAILED: the gate")
