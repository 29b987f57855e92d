"""Scorers and importance losses for the pruning chapters agree with independent computations."""

import pytest
import torch
from tiny_models import TINY_BERT, seeded_config

from helpers.book import course
from helpers.heads import metrics
from helpers.zoo.classifier_training import predict
from helpers.zoo.scorers import (
    classifier_loss,
    classifier_loss_batches,
    classifier_scorer,
    translation_loss,
    translation_loss_batches,
    translation_scorer,
)
from helpers.zoo.translation_model import encode_pairs, mean_token_loss, translate


def test_classifier_scores_and_losses(smoke):
    model, tokenizer = course.load_classifier(smoke, "paraphrase")
    examples = course.load_data(smoke, "paraphrase")["valid"]
    pred = predict(model, tokenizer, examples=examples, max_length=80)
    gold = [e.label for e in examples]
    assert classifier_scorer(tokenizer, examples, metric="f1", max_length=80)(model) == metrics.f1(pred, gold)
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        classifier_scorer(tokenizer, examples, metric="bleu")
    batches = classifier_loss_batches(tokenizer, examples, max_length=80, batch_size=8)
    with torch.no_grad():
        for batch in batches:
            mean = model(**batch).loss  # transformers' own mean cross-entropy with labels
            assert classifier_loss(model, batch).mean() == pytest.approx(float(mean), rel=1e-5)
    assert sum(len(b["labels"]) for b in batches) == len(examples)


class _WordIds:
    """A tokenizer for a tiny random BERT: a word's id is the sum of its characters' codes, modulo 45, plus 5."""

    def __call__(self, first, pairs=None, padding=True, truncation=True, max_length=64, return_tensors="pt"):
        rows = [[1] + [5 + sum(map(ord, w)) % 45 for w in text.split()][: max_length - 1] for text in first]
        width = max(map(len, rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}


def _tiny_bert_and_examples():
    import random
    from types import SimpleNamespace

    from transformers import BertConfig, BertForSequenceClassification

    config = seeded_config(BertConfig, TINY_BERT, num_hidden_layers=3, initializer_range=0.5)
    rng = random.Random(0)
    words = "the a cat dog sees runs blue red big small over under".split()
    examples = [
        SimpleNamespace(
            text=" ".join(rng.choices(words, k=rng.randint(2, 12))), text_pair=None, label=rng.randrange(3)
        )
        for _ in range(60)
    ]
    return BertForSequenceClassification(config).eval(), examples


@pytest.mark.parametrize("processes", ["1", "2"])
@pytest.mark.parametrize("per_pass", [1, 3])
def test_classifier_scores_of_many_head_specs_equal_one_at_a_time(monkeypatch, processes, per_pass):
    import helpers

    model, examples = _tiny_bert_and_examples()
    score = classifier_scorer(
        _WordIds(), examples, metric="accuracy", max_length=16, batch_size=16, configs_per_pass=per_pass
    )
    specs = [{}, {"self": {0: [0]}}, {"self": {2: [0, 1, 2]}}, {"self": {0: [1, 2], 1: [0, 1, 3], 2: [3]}}]
    one = []
    for spec in specs:
        with helpers.HeadGates(model) as gates:
            gates.mask(spec)
            one.append(score(model))
    monkeypatch.setenv("SIXTEEN_HEADS_SWEEP_PROCESSES", processes)
    assert score.many(model, specs) == one
    assert len(set(one)) > 1  # the specs change the score


def test_scorers_that_share_passes_give_each_scorers_own_values_and_compute_a_spec_once(monkeypatch):
    from helpers.sweeps import ablation
    from helpers.zoo.scorers import classifier_scorers

    model, examples = _tiny_bert_and_examples()
    monkeypatch.setenv("SIXTEEN_HEADS_SWEEP_PROCESSES", "1")
    specs = [{}, {"self": {0: [0]}}, {"self": {2: [0, 1, 2]}}, {"self": {0: [1, 2], 1: [0, 1, 3], 2: [3]}}]
    alone = {
        m: classifier_scorer(_WordIds(), examples, metric=m, max_length=16, batch_size=16).many(model, specs)
        for m in ("accuracy", "log_likelihood")
    }
    scored = []
    for name in ("gated_passes", "pruned_passes"):  # a CPU prunes physically (one per pass); a GPU gates
        real = getattr(ablation, name)
        monkeypatch.setattr(
            ablation,
            name,
            lambda m, configs, *a, real=real, **k: (scored.extend(configs), real(m, configs, *a, **k))[1],
        )
    shared = classifier_scorers(
        _WordIds(), examples, metrics=["accuracy", "log_likelihood"], max_length=16, batch_size=16
    )
    assert shared["accuracy"].many(model, specs) == alone["accuracy"]
    assert shared["log_likelihood"].many(model, specs[::-1]) == alone["log_likelihood"][::-1]
    assert scored == specs  # the second scorer computed nothing
    other, _ = _tiny_bert_and_examples()
    shared["log_likelihood"].many(other, specs[:1])  # another model object is computed, not looked up
    assert scored == specs + specs[:1]


def test_translation_scores_and_losses(smoke):
    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["valid"]
    hyps = translate(model, [p.src for p in pairs], beam=2)
    assert translation_scorer(pairs, beam=2)(model) == metrics.bleu(hyps, [p.ref for p in pairs])[0]
    batches = translation_loss_batches(model, pairs, max_tokens=200)
    with torch.no_grad():
        total = sum(float(translation_loss(model, b).sum()) for b in batches)
    tokens = sum(len(tgt) for _, tgt in encode_pairs(pairs, model))
    assert total / tokens == pytest.approx(mean_token_loss(model, encode_pairs(pairs, model)), rel=1e-5)


def test_importance_wrappers_equal_head_importance_on_the_same_batches(smoke):
    import helpers
    from helpers.zoo.scorers import classifier_importance, translation_importance

    model, tokenizer = course.load_classifier(smoke, "paraphrase")
    examples = course.load_data(smoke, "paraphrase")["train"][:16]
    direct = helpers.head_importance(
        model, classifier_loss_batches(tokenizer, examples, 80), loss_fn=classifier_loss, progress=False
    )
    assert torch.equal(classifier_importance(model, tokenizer, examples, 80)["self"], direct["self"])
    mt = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["train"][:16]
    direct = helpers.head_importance(mt, translation_loss_batches(mt, pairs), loss_fn=translation_loss, progress=False)
    wrapped = translation_importance(mt, pairs)
    assert all(torch.equal(wrapped[k], direct[k]) for k in direct)


def test_decoding_stops_where_fairseqs_length_rule_says():
    """An untrained model repeats itself to the length limit: ``max_len_a`` x the batch's source
    width + ``max_len_b`` bounds every output, and the default is fairseq's, which the authors
    ran: a flat 200 tokens (``max_len_a`` 0)."""
    from helpers.zoo.translation_model import MAX_LEN_A, MAX_LEN_B, TranslationConfig, model_for
    from helpers.zoo.translation_task import generate

    pairs = generate({"train": 30, "test13": 6}, seed=2)
    model = model_for(pairs["train"], TranslationConfig(layers=1, heads=2, embed_dim=8, ffn_dim=16, seed=3)).eval()
    sources = [p.src for p in pairs["test13"]]
    growing = translate(model, sources, beam=1, max_len_a=1.0, max_len_b=4)
    # fairseq's limit counts the batch's padded source width (the longest source and its </s>)
    assert max(len(h.split()) for h in growing) == max(len(s.split()) for s in sources) + 1 + 4
    flat = translate(model, sources, beam=1, max_len_b=4)
    assert max(len(h.split()) for h in flat) == 4
    free = translate(model, sources, beam=1)
    assert (MAX_LEN_A, MAX_LEN_B) == (0.0, 200) and max(len(h.split()) for h in free) > max(
        len(h.split()) for h in growing
    )
    assert translate(model, sources, beam=1, max_len_a=0.0, max_len_b=200) == free
