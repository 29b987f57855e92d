"""The likelihood score beside BLEU and accuracy: per-sentence teacher-forced NLL of the
reference, and the gold label's log-probability, checked against independent computations,
against the physically pruned model, and one sentence at a time."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch

import helpers
from helpers.book import course
from helpers.book.experiments.head_effects import classifier_effects, translation_likelihood_effects
from helpers.heads.metrics import log_likelihood
from helpers.heads.significance import Bootstrap
from helpers.sweeps.ablation import all_but_one_configs, one_head_configs
from helpers.sweeps.config_batches import UNMASKED
from helpers.zoo.scorers import (
    classifier_scorer,
    masked_translation_nll,
    single_layer_translation_nll,
    translation_likelihood_scorer,
    translation_nll,
)

SPEC = {"enc_self": {0: [1]}, "enc_dec": {1: [0, 2]}, "dec_self": {0: [3]}}


@pytest.fixture
def mt(smoke):
    return course.load_translation(smoke), course.load_data(smoke, "translation")["test13"][:10]


def _reference_nll(model, pair) -> tuple[float, int]:
    """One sentence's NLL computed here from the model's logits: log-softmax, gold tokens, sum."""
    src_dict, tgt_dict = model.encoder.dictionary, model.decoder.dictionary
    src = src_dict.encode_line(pair.src, add_if_not_exist=False, append_eos=True).long()[None]
    tgt = tgt_dict.encode_line(pair.ref, add_if_not_exist=False, append_eos=True).long()
    prev = torch.cat([tgt.new_tensor([tgt_dict.eos()]), tgt[:-1]])[None]  # </s> then the target shifted right
    with torch.no_grad():
        logits = model(src, torch.tensor([src.shape[1]]), prev)[0][0]  # [T, vocab]
    return float(-torch.log_softmax(logits.double(), -1)[torch.arange(len(tgt)), tgt].sum()), len(tgt)


def test_each_sentence_scores_as_it_does_alone_and_as_computed_from_the_logits(mt):
    model, pairs = mt
    batched = translation_nll(model, pairs)
    alone = np.concatenate([translation_nll(model, [p]) for p in pairs])
    assert batched.shape == (len(pairs), 2)
    np.testing.assert_allclose(batched, alone, rtol=1e-5)
    direct = np.array([_reference_nll(model, p) for p in pairs])
    np.testing.assert_allclose(batched, direct, rtol=1e-4)
    assert translation_likelihood_scorer(pairs)(model) == pytest.approx(
        -direct[:, 0].sum() / direct[:, 1].sum(), rel=1e-5
    )


def test_the_gated_likelihood_equals_the_pruned_models(mt):
    model, pairs = mt
    pruned = copy.deepcopy(model)
    helpers.prune_heads(pruned, SPEC)
    with helpers.HeadGates(model) as gates:
        gates.mask(SPEC)
        gated = translation_nll(model, pairs)
    np.testing.assert_allclose(gated, translation_nll(pruned, pairs), rtol=1e-5)
    assert not np.allclose(gated, translation_nll(model, pairs), rtol=1e-5)  # the heads did matter


def test_many_configurations_per_pass_give_each_ones_own_likelihood(mt, monkeypatch):
    model, pairs = mt
    monkeypatch.setenv("SIXTEEN_HEADS_SWEEP_PROCESSES", "1")
    configs = one_head_configs(model)[::7] + [SPEC]
    together = dict(
        (i, rows)
        for i, (_, rows) in enumerate(
            masked_translation_nll(model, pairs, configs=configs, configs_per_pass=4, progress=False)
        )
    )
    for i, config in enumerate(configs):
        with helpers.HeadGates(model) as gates:
            gates.mask(config if isinstance(config, dict) else {config[0]: {config[1]: list(config[2])}})
            np.testing.assert_allclose(together[i], translation_nll(model, pairs), rtol=1e-5)


@pytest.mark.parametrize("processes", ["1", "2"])
def test_replayed_single_layer_likelihood_equals_gating_each_configuration(mt, monkeypatch, processes):
    """The sweep that replays the layers below (the whole encoder for decoder kinds) gives every
    configuration the rows of a plain gated pass, in the order of the pairs."""
    model, pairs = mt
    monkeypatch.setenv("SIXTEEN_HEADS_SWEEP_PROCESSES", processes)
    configs = [UNMASKED] + one_head_configs(model)[::5] + all_but_one_configs(model)[::11]
    kinds = {c[0] for c in configs if c != UNMASKED}
    assert kinds == {"enc_self", "enc_dec", "dec_self"}
    got = list(single_layer_translation_nll(model, pairs, configs=configs, progress=False, max_tokens=40))
    assert [c for c, _ in got] == configs
    for config, rows in got:
        with helpers.HeadGates(model) as gates:
            if config != UNMASKED:
                gates.mask({config[0]: {config[1]: list(config[2])}})
            np.testing.assert_allclose(rows, translation_nll(model, pairs), rtol=1e-5)


def test_likelihood_effects_are_cached_and_add_up(mt, tmp_path):
    model, pairs = mt
    configs = one_head_configs(model)[:5]
    args = dict(bootstrap=Bootstrap(n_resamples=50, min_units=2), progress=False)
    fresh = translation_likelihood_effects(model, pairs, configs=configs, **args)
    cached = translation_likelihood_effects(model, pairs, configs=configs, cache_dir=tmp_path, **args)
    again = translation_likelihood_effects(model, pairs, configs=configs, cache_dir=tmp_path, **args)
    pd.testing.assert_frame_equal(fresh, cached)
    pd.testing.assert_frame_equal(fresh, again)
    base = translation_nll(model, pairs)
    assert fresh["base"].iloc[0] == pytest.approx(log_likelihood(base.sum(0)))
    kind, layer, heads = configs[0]
    with helpers.HeadGates(model) as gates:
        gates.mask({kind: {layer: list(heads)}})
        masked = translation_nll(model, pairs)
    row = fresh.iloc[0]
    assert row["score"] == pytest.approx(log_likelihood(masked.sum(0)), rel=1e-6)
    assert row["score_even"] == pytest.approx(log_likelihood(masked[0::2].sum(0)), rel=1e-6)


def test_the_gold_label_log_probability_of_a_classifier(smoke, tmp_path):
    model, tokenizer = course.load_classifier(smoke, "nli")
    examples = course.load_data(smoke, "nli")["matched"][:16]
    config = one_head_configs(model)[2]
    table = classifier_effects(
        model,
        tokenizer,
        examples=examples,
        configs=[config],
        max_length=48,
        bootstrap=Bootstrap(n_resamples=20, min_units=2),
        progress=False,
        measure="likelihood",
        cache_dir=tmp_path,
    )
    accuracy = classifier_effects(
        model,
        tokenizer,
        examples=examples,
        configs=[config],
        max_length=48,
        bootstrap=Bootstrap(n_resamples=20, min_units=2),
        progress=False,
        cache_dir=tmp_path,
    )

    def gold_log_prob(
        m,
    ) -> tuple[float, float]:  # the mean gold log-probability and the accuracy, one example at a time
        lp, right = [], []
        for e in examples:
            enc = tokenizer(e.premise, e.hypothesis, return_tensors="pt", truncation=True, max_length=48)
            with torch.no_grad():
                logits = m(**enc).logits[0].double()
            lp.append(float(torch.log_softmax(logits, -1)[e.label]))
            right.append(int(logits.argmax()) == e.label)
        return float(np.mean(lp)), float(np.mean(right))

    pruned = copy.deepcopy(model)
    kind, layer, heads = config
    helpers.prune_heads(pruned, {kind: {layer: list(heads)}})
    base_lp, base_acc = gold_log_prob(model)
    masked_lp, masked_acc = gold_log_prob(pruned)
    assert table["base"].iloc[0] == pytest.approx(base_lp, abs=1e-5)
    assert table["score"].iloc[0] == pytest.approx(masked_lp, abs=1e-5)
    assert accuracy["base"].iloc[0] == base_acc and accuracy["score"].iloc[0] == masked_acc
    with pytest.raises(ValueError, match="unknown measure 'bleu'"):
        classifier_effects(model, tokenizer, examples=examples, configs=[config], measure="bleu")
    # the pruning curves' scorer: the same mean gold log-probability, unmasked and under a head spec
    score = classifier_scorer(tokenizer, examples, metric="log_likelihood", max_length=48)
    assert score(model) == pytest.approx(base_lp, abs=1e-5)
    assert score.many(model, [{kind: {layer: list(heads)}}, {}]) == pytest.approx([masked_lp, base_lp], abs=1e-5)
