"""The write-the-method checks (chapters/ch17b_write_the_method.py) pass a right answer, explain a wrong
one, name each common mistake they know, and turn an error in the student's code into a message."""

from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.book.chapters.ch17b_write_the_method import (
    ExerciseMismatch,
    check_bootstrap,
    check_gate,
    check_importance,
    check_pruning_loop,
)
from helpers.heads.gates import HeadGates

ROOT = Path(__file__).resolve().parents[1]


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


def right_pruning_curve(model, scores, evaluate, step, rank=None):
    layers, heads = scores.shape
    pool = [(i, h) for i in range(layers) for h in range(heads)]
    order = sorted(pool, key=rank or (lambda lh: float(scores[lh])))
    curve = []
    for k in range(round(1 / step) + 1):
        with HeadGates(model) as gates:
            for layer, head in order[: round(k * step * len(order))]:
                gates.tensor("self").data[layer, head] = 0.0
            curve.append(evaluate(model))
    return curve


def test_a_right_answer_passes_each_check():
    assert check_gate(right_gate).startswith("ok: your gate matches gate_heads")
    assert check_importance(right_importance).startswith("ok: your I_h matches head_importance")
    assert check_bootstrap(right_bootstrap).startswith("ok: your bootstrap matches paired_bootstrap")
    assert check_pruning_loop(right_pruning_curve).startswith("ok: your pruning loop matches")


def test_a_wrong_answer_is_explained():
    with pytest.raises(ExerciseMismatch, match="the gate: your numbers differ.*Reshape"):
        check_gate(lambda context, xi, head_dim: context * xi.mean())
    with pytest.raises(ExerciseMismatch, match="has shape"):
        check_gate(lambda context, xi, head_dim: context[..., :head_dim])
    with pytest.raises(ExerciseMismatch, match="other sign"):
        check_bootstrap(lambda a, b, indices: (b.mean() - a.mean(), 0.5))


def _importance(**how):
    from helpers import head_importance

    return lambda model, batches, loss_fn: head_importance(model, batches, loss_fn=loss_fn, progress=False, **how)[
        "self"
    ]


@pytest.mark.parametrize(
    ("how", "named"),
    [
        ({"abs_per": "token"}, "the absolute value taken per token"),
        ({"normalize": None}, "I_h without the per-layer normalisation"),
        ({"abs_per": "token", "normalize": None}, "the absolute value per token and no per-layer normalisation"),
    ],
)
def test_each_common_importance_mistake_is_named(how, named):
    with pytest.raises(ExerciseMismatch, match=f"I_h: your numbers are those of {named}"):
        check_importance(_importance(**how))


def test_a_p_in_a_fixed_direction_and_its_complement_are_named():
    def fixed(a, b, indices):  # the share of resamples where b is not above a, whatever delta's sign
        return b.mean() - a.mean(), float(((b[indices] - a[indices]).mean(1) <= 0).mean())

    def complement(a, b, indices):
        delta, p = right_bootstrap(a, b, indices)
        return delta, 1 - p

    def ties_for(a, b, indices):  # a resample with no difference counted for the change
        delta = b.mean() - a.mean()
        resampled = b[indices].mean(1) - a[indices].mean(1)
        return delta, float(np.mean(np.sign(resampled) == -np.sign(delta)))

    with pytest.raises(ExerciseMismatch, match="a p in one fixed direction"):
        check_bootstrap(fixed)
    with pytest.raises(ExerciseMismatch, match="ties .* counted for the change"):
        check_bootstrap(ties_for)
    with pytest.raises(ExerciseMismatch, match="which is 1 - p"):
        check_bootstrap(complement)


def test_a_gate_on_interleaved_columns_is_named():
    with pytest.raises(ExerciseMismatch, match="interleaved columns"):
        check_gate(lambda context, xi, head_dim: (context.unflatten(-1, (head_dim, -1)) * xi).flatten(-2))


def test_the_pruning_loops_mistakes_are_named():
    def descending(model, scores, evaluate, step):
        return right_pruning_curve(model, scores, evaluate, step, rank=lambda lh: -float(scores[lh]))

    def per_layer(model, scores, evaluate, step):  # each layer's least important first, layer by layer
        ranks = scores.argsort(dim=1).argsort(dim=1)
        return right_pruning_curve(model, scores, evaluate, step, rank=lambda lh: (int(ranks[lh]), lh[0]))

    with pytest.raises(ExerciseMismatch, match="the most important heads pruned first"):
        check_pruning_loop(descending)
    with pytest.raises(ExerciseMismatch, match="ranked within each layer"):
        check_pruning_loop(per_layer)


def test_an_error_in_the_students_code_is_a_message_with_the_call():
    def broken(context, xi, head_dim):
        return context.view(-1, head_dim, 7)

    with pytest.raises(ExerciseMismatch, match=r"your function raised RuntimeError: .*when called as gate\(context"):
        check_gate(broken)


def test_every_prediction_the_guide_asks_for_has_an_answer_in_the_key_and_back():
    import re
    import shlex

    import nbformat

    from helpers.book.chapters.ch17_teaching_guide import PREDICTIONS
    from helpers.book.profiles.profile import check_runner_command

    guide = nbformat.read(ROOT / "notebooks" / "17_teaching_guide.ipynb", as_version=4)
    pattern = r"^\d+\. `(\.venv/bin/python -m helpers\.book\.running\.runner [^`]+)`  \n(?:.*\n)?(.*)"
    asked = set()
    for cell in guide.cells:
        for command, question in re.findall(pattern, cell.source, re.M):
            if question.strip().startswith("**Predict:**"):
                chapter, _ = check_runner_command(command)
                words = shlex.split(command)
                asked.add((chapter, words[words.index("-p") + 1]))
    keyed = {(p.chapter, p.override) for p in PREDICTIONS}
    assert asked == keyed, (sorted(asked - keyed), sorted(keyed - asked))
    assert len(asked) >= 7


def test_the_keys_answers_read_the_smoke_books_tables(smoke_executed):
    from helpers.book.chapters.ch17_teaching_guide import PREDICTIONS
    from helpers.book.store.results import results_dir

    base = results_dir("smoke")
    for p in PREDICTIONS:
        answer = p.answer(base, base)
        assert answer and not answer.startswith("not measured"), (p, answer)


def test_a_prediction_is_run_as_a_run_of_its_own_and_answered(smoke_executed, tmp_path):
    import hashlib

    from helpers.book.chapters.ch17_teaching_guide import PREDICTIONS, key_table
    from helpers.book.running.teacher_key import run_prediction
    from helpers.book.store.results import results_dir

    base = results_dir("smoke")

    def digest() -> str:
        return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(base.glob("*.csv")))).hexdigest()

    before = digest()
    p = next(p for p in PREDICTIONS if p.chapter == "15a_how_sure_we_are")
    assert run_prediction("smoke", p.chapter, p.override, tmp_path / p.slug) == 0
    assert digest() == before  # the book's own tables stay as they were
    key = key_table(base, tmp_path).set_index("chapter")
    answer = key.loc[p.chapter, "answer"]
    assert "at the new alpha: one look at alpha flags" in answer and "at the lab's" in answer
    assert key.loc["03_ablating_one_head", "answer"].iloc[0].startswith("not measured")


def test_all_four_checks_at_once_say_what_each_function_gives():
    from helpers.book.chapters.ch17b_write_the_method import checks_of

    table = checks_of({"my_gate": right_gate, "my_bootstrap": lambda a, b, indices: (0.0, 0.5)}).set_index("function")
    assert table.loc["my_gate", "result"].startswith("ok: your gate matches")
    assert table.loc["my_importance", "result"] == "not written yet"
    assert table.loc["my_bootstrap", "result"].startswith("the bootstrap's (delta, p)")
    assert list(table.index) == ["my_gate", "my_importance", "my_bootstrap", "my_pruning_curve"]
