"""The pinned fairseq (fairseq-fixed 0.12.3.1 on Python 3.11) trains; pruned models still train."""

import pytest
import torch
from tiny_models import bert, fairseq_wmt

import helpers


def fairseq_label_smoothed_loss(model, batch):
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    logits = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])[0]
    lprobs = torch.log_softmax(logits, dim=-1).view(-1, logits.size(-1))
    loss, _ = label_smoothed_nll_loss(lprobs, batch["target"].view(-1), 0.1, ignore_index=1)
    return loss


def bert_loss(case):
    return lambda model, batch: case.loss(model, batch).mean()


def train(model, batch, loss_fn, steps=60):
    model.train()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-3, betas=(0.9, 0.98))
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("pruned", [False, True], ids=["full", "pruned"])
def test_fairseq_training_step_reduces_label_smoothed_loss(pruned):
    case = fairseq_wmt()
    if pruned:
        helpers.prune_heads(case.model, {"enc_self": {0: [1, 2]}, "enc_dec": {1: [0, 1, 2, 3]}, "dec_self": {0: [3]}})
    losses = train(case.model, case.batch, fairseq_label_smoothed_loss)
    assert losses[-1] < 0.5 * losses[0]
    site = helpers.attention_sites(case.model)[0]
    assert site.query.weight.grad is not None and site.query.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("pruned", [False, True], ids=["full", "pruned"])
def test_bert_training_step_reduces_loss(pruned):
    case = bert()
    if pruned:
        helpers.prune_heads(case.model, {"self": {0: [0, 1, 2], 1: [0, 1, 2, 3]}})
    losses = train(case.model, case.batch, bert_loss(case))
    assert losses[-1] < 0.5 * losses[0]


def test_importing_fairseq_through_helpers_leaves_logging_alone():
    import subprocess
    import sys
    from pathlib import Path

    report = "import logging; r = logging.getLogger(); print(r.level, len(r.handlers))"

    def run(code):
        return subprocess.run(
            [sys.executable, "-c", f"{code}; {report}"],
            cwd=Path(__file__).parent.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()

    assert run("import fairseq") != ["30", "0"]  # what fairseq 0.12 does on its own
    assert run("from helpers.base.fairseq_compat import import_fairseq; import_fairseq()") == ["30", "0"]
    # and its import-time INFO lines do not reach a notebook that logs at INFO
    chatty = "import logging; logging.basicConfig(level=logging.INFO); "

    def stderr(code):
        return subprocess.run(
            [sys.executable, "-c", chatty + code],
            cwd=Path(__file__).parent.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stderr

    assert "INFO:fairseq" in stderr("import fairseq")
    assert "INFO:fairseq" not in stderr("from helpers.base.fairseq_compat import import_fairseq; import_fairseq()")


def test_uniform_dropout_draws_the_same_distribution_and_is_restored():
    import torch.nn.functional as F

    from helpers.zoo.translation_model import uniform_dropout

    original = F.dropout
    x = torch.ones(400_000)
    torch.manual_seed(0)
    with uniform_dropout():
        assert F.dropout is not original
        y = F.dropout(x, 0.1, True)
        assert F.dropout(x, 0.1, False) is x and F.dropout(x, 0.0, True) is x
        z = x.clone()
        assert F.dropout(z, 0.25, True, inplace=True) is z
    assert F.dropout is original
    kept = y != 0
    assert abs(float(kept.float().mean()) - 0.9) < 0.003  # 5 standard errors
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.9))
    assert abs(float((z != 0).float().mean()) - 0.75) < 0.004


def test_the_cosine_schedule_warms_up_as_before_and_ends_at_zero():
    """The translation recipe's schedules: the same linear warm-up; fairseq's inverse square root
    after it, or half a cosine that reaches 0 at the last update (and stays there)."""
    import math

    from helpers.zoo.translation_model import TranslationConfig, inverse_sqrt, learning_rate

    fairseq = TranslationConfig(lr=5e-3, warmup_updates=100)
    cosine = TranslationConfig(lr=5e-3, warmup_updates=100, schedule="cosine")
    for step in (1, 50, 100):
        assert learning_rate(step, cosine, 1000) == learning_rate(step, fairseq, 1000) == inverse_sqrt(step, fairseq)
    assert learning_rate(400, fairseq, 1000) == pytest.approx(5e-3 * math.sqrt(100 / 400))
    assert learning_rate(550, cosine, 1000) == pytest.approx(2.5e-3)  # half-way down
    assert learning_rate(1000, cosine, 1000) == pytest.approx(0.0, abs=1e-15)
    assert learning_rate(1200, cosine, 1000) == pytest.approx(0.0, abs=1e-15)
    rates = [learning_rate(s, cosine, 1000) for s in range(100, 1001)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))  # never rises after the warm-up
    with pytest.raises(ValueError, match="unknown schedule 'linear' in the translation recipe"):
        TranslationConfig(schedule="linear")
