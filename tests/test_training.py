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


def _copy_pairs(n: int, seed: int) -> list:
    """Copy-task pairs (the target is the source) over 24 words, 3 to 8 of them: a task a tiny
    Transformer learns within seconds, after which most heads' loss gradients are small."""
    import random
    from types import SimpleNamespace

    rng, words = random.Random(seed), [f"w{i}" for i in range(24)]
    out = []
    for _ in range(n):
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(3, 8)))
        out.append(SimpleNamespace(src=sentence, ref=sentence))
    return out


@pytest.mark.parametrize("decay", ["decoupled", "coupled"])
def test_the_optimiser_decays_weights_as_its_decay_says(decay):
    """With no loss gradient, fairseq's Adam (the recipe's, ``decoupled``) shrinks each weight by
    the factor 1 - lr * weight_decay; torch's Adam with weight_decay (``coupled``) divides the
    decay term by its own running scale and moves every weight by about lr toward zero, however
    small the weight."""
    from helpers.zoo.translation_model import TranslationConfig, optimizer_for

    weights = torch.nn.Linear(4, 3, bias=False)
    with torch.no_grad():
        weights.weight.copy_(torch.tensor([[1.0, -0.5, 0.01, -0.001]] * 3))
    before = weights.weight.detach().clone()
    config = TranslationConfig(lr=1e-3, weight_decay=1e-4, decay=decay)
    optimizer = optimizer_for(weights, config)
    weights.weight.grad = torch.zeros_like(weights.weight)
    optimizer.step()
    moved = weights.weight.detach()
    if decay == "decoupled":
        torch.testing.assert_close(moved, before * (1 - 1e-3 * 1e-4), rtol=0, atol=1e-9)
    else:
        decay_term = 1e-4 * before  # Adam's first step is lr * g / (|g| + eps): about lr, whatever g's size
        torch.testing.assert_close(moved, before - 1e-3 * decay_term / (decay_term.abs() + 1e-8), rtol=0, atol=1e-9)


def test_decay_coupled_into_adam_kills_heads_that_the_recipe_keeps(tmp_path):
    """The course model's 40% of dead heads came from torch's Adam with weight_decay (chapter 02's
    ablation). A tiny Transformer (4+4 layers, 4 heads) learns a copy task with the same weight
    decay (5e-3, large so that it acts within seconds): coupled into the gradient it drives whole
    heads to zero while the model still learns; the recipe's decoupled decay, the trainer's
    default, leaves every head alive."""
    from helpers.heads.liveness import dead_heads, head_norms
    from helpers.zoo.translation_model import TranslationConfig, model_for
    from helpers.zoo.translation_model import train as train_translation

    pairs, valid = _copy_pairs(1000, seed=0), _copy_pairs(32, seed=1)
    recipe = dict(layers=4, heads=4, embed_dim=32, ffn_dim=64, epochs=30, max_tokens=400, lr=5e-3)
    recipe |= dict(warmup_updates=20, schedule="cosine", dropout=0.0, attention_dropout=0.0, label_smoothing=0.0)
    found = {}
    for decay in ("coupled", None):  # None: the trainer's default
        config = TranslationConfig(**recipe, weight_decay=5e-3, **({"decay": decay} if decay else {}))
        model = model_for(pairs, config)
        history = train_translation(
            model, pairs, valid_pairs=valid, config=config, directory=tmp_path / str(decay), progress=False
        )
        found[decay] = (dead_heads(head_norms(model)), history[-1]["valid_loss"])
    assert len(found["coupled"][0]) >= 3 and found["coupled"][1] < 0.5  # heads died, the copy was learned
    assert found[None][0] == [] and found[None][1] < 0.5


@pytest.mark.parametrize("profile, model", [("course", "translation"), ("lab", "translation"), ("paper", "iwslt")])
def test_every_translation_recipe_decays_weights_as_fairseq_does(profile, model):
    """The course's, the lab's and the paper profile's IWSLT recipe train with fairseq's Adam and
    its decoupled weight decay of 1e-4 (the authors' train_iwslt.sh: --weight-decay 0.0001)."""
    from fairseq.optim.adam import Adam

    from helpers.book.profiles import load_profile
    from helpers.zoo.translation_model import TranslationConfig, optimizer_for

    config = TranslationConfig(**load_profile(profile).model(model)["train"])
    optimizer = optimizer_for(torch.nn.Linear(2, 2), config)
    assert isinstance(optimizer, Adam) and optimizer.param_groups[0]["weight_decay"] == 1e-4


def test_the_paper_profiles_iwslt_model_unties_the_decoders_embeddings_as_the_authors_script():
    """train_iwslt.sh passes no --share-decoder-input-output-embed: the paper profile's IWSLT model
    keeps the decoder's input embedding and output projection apart; the course's ties them."""
    from helpers.book.profiles import load_profile
    from helpers.zoo.translation_model import TranslationConfig, model_for

    pairs = _copy_pairs(20, seed=0)
    tied = {}
    for profile, name in (("paper", "iwslt"), ("course", "translation")):
        recipe = {**load_profile(profile).model(name)["train"], "layers": 1, "embed_dim": 16, "ffn_dim": 16}
        decoder = model_for(pairs, TranslationConfig(**recipe)).decoder
        tied[profile] = decoder.output_projection.weight is decoder.embed_tokens.weight
    assert tied == {"paper": False, "course": True}


def test_bertadam_takes_the_authors_update_step_by_step():
    """``BertAdam`` against the update written out: the gradient clipped to norm 1, no bias
    correction, e = 1e-6, the weight decay inside the learning-rate step."""
    from helpers.zoo.classifier_training import BertAdam

    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(5))
    expected, m, v = w.detach().clone(), torch.zeros(5), torch.zeros(5)
    optimizer = BertAdam([w], lr=0.1, weight_decay=0.01)
    for scale in (3.0, 0.2, 5.0):  # norms above and below the clipping norm
        g = torch.randn(5) * scale
        w.grad = g.clone()
        optimizer.step()
        g = g * min(1.0, 1.0 / (g.norm().item() + 1e-6))
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        expected = expected - 0.1 * (m / (v.sqrt() + 1e-6) + 0.01 * expected)
        torch.testing.assert_close(w.detach(), expected, rtol=0, atol=1e-6)


def test_the_paper_profile_fine_tunes_bert_with_bertadam(monkeypatch):
    """The paper profile's recipe names ``bertadam``, and ``fine_tune`` then steps ``BertAdam``;
    an unknown optimizer is refused with the names it takes."""
    from helpers.book.profiles import load_profile
    from helpers.zoo import classifier_training
    from helpers.zoo.classifier_training import BertAdam, FineTuneConfig, fine_tune
    from helpers.zoo.nli_task import generate
    from helpers.zoo.registry import load_encoder

    recipe = load_profile("paper").model("nli")["fine_tune"]
    assert FineTuneConfig(**recipe).optimizer == "bertadam"
    with pytest.raises(ValueError, match="adamw"):
        FineTuneConfig(optimizer="sgd")
    steps = []
    original = BertAdam.step
    monkeypatch.setattr(classifier_training.BertAdam, "step", lambda self, *a: steps.append(1) or original(self, *a))
    model, tokenizer = load_encoder("tiny-bert", num_labels=3, seed=0)
    examples = generate({"train": 8}, seed=0)["train"]
    fine_tune(
        model,
        tokenizer,
        train=examples,
        config=FineTuneConfig(epochs=1.0, batch_size=4, optimizer="bertadam"),
        progress=False,
    )
    assert len(steps) == 2
