"""Pruning curves: masking the first k heads of an order scores like physically removing them;
orders, steps and the prunable share behave as specified on hand-made inputs."""

import copy
import dataclasses

import pandas as pd
import pytest
import torch
from tiny_models import ALL_CASES, bert

import helpers
from helpers.heads.gates import heads_of, spec_of
from helpers.heads.sites import explicit_attention
from helpers.sweeps.pruning_curves import (
    counts,
    order_by_ablation,
    order_by_importance,
    prunable_share,
    pruning_curve,
    pruning_curves,
    random_order,
    reestimated_curve,
    score_specs,
)


def test_steps_are_tenths_of_the_pool_and_end_with_all_of_it():
    assert counts(144) == [0, 14, 29, 43, 58, 72, 86, 101, 115, 130, 144]
    assert counts(8) == [0, 1, 2, 3, 4, 5, 6, 7, 8]  # 8 heads: some tenths round to the same count
    assert counts(96, step=0.5) == [0, 48, 96]


@pytest.mark.parametrize("name", ["bert", "fairseq-iwslt"])
def test_a_masked_curve_equals_physically_pruned_copies(name):
    case = ALL_CASES[name]()
    order = random_order(heads_of(case.model), seed=3)

    def evaluate(m):
        return float(case.run(m, case.batch).detach().double().sum())

    with torch.no_grad():
        curve = pruning_curve(case.model, order, evaluate, progress=False)
        for count, score in zip(curve["pruned"], curve["score"]):
            pruned = copy.deepcopy(case.model)
            helpers.prune_heads(pruned, spec_of(order[:count]))
            assert score == pytest.approx(evaluate(pruned), rel=1e-4, abs=1e-4), count
    assert curve["share"].tolist()[0] == 0 and curve["share"].tolist()[-1] == 1
    # gates removed afterwards: the unpruned step is the model's own score on the path curves take
    # (fairseq's explicit attention, which a gate needs), and equals its fused one up to rounding
    with explicit_attention(case.model):
        assert evaluate(case.model) == curve["score"].iloc[0]
    assert evaluate(case.model) == pytest.approx(curve["score"].iloc[0], rel=1e-5)


def test_orders():
    pool = [("self", 0, 0), ("self", 0, 1), ("self", 1, 0), ("self", 1, 1)]
    scores = {"self": torch.tensor([[0.5, 0.1], [0.9, 0.1]])}
    assert order_by_importance(scores, pool) == [("self", 0, 1), ("self", 1, 1), ("self", 0, 0), ("self", 1, 0)]
    effects = pd.DataFrame(
        {"kind": "self", "layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "delta": [-0.2, 0.05, -1.0, 0.0]}
    )
    assert order_by_ablation(effects, pool) == [("self", 0, 1), ("self", 1, 1), ("self", 0, 0), ("self", 1, 0)]
    with pytest.raises(ValueError, match="no delta for 1 heads"):
        order_by_ablation(effects.iloc[:3], pool)
    assert sorted(random_order(pool, 0)) == sorted(pool)
    assert random_order(pool, 0) == random_order(pool, 0)
    assert spec_of([("enc_dec", 2, 1), ("self", 0, 3), ("enc_dec", 2, 0)]) == {
        "enc_dec": {2: [1, 0]},
        "self": {0: [3]},
    }


def test_prunable_share_stops_at_the_first_step_out_of_tolerance():
    curve = pd.DataFrame({"pruned": [0, 1, 2, 3], "share": [0, 0.1, 0.2, 0.3], "score": [0.80, 0.795, 0.78, 0.80]})
    assert prunable_share(curve, 0.01) == 0.1  # 0.3 is back within tolerance, but 0.2 was not
    assert prunable_share(curve, 0.05) == 0.3


def test_reestimation_masks_the_pruned_heads_and_never_picks_them_again():
    case = bert(layers=2, heads=4)
    pool = heads_of(case.model)
    seen_masked = []

    def importance(model, gates):
        seen_masked.append(int((gates.tensor("self") == 0).sum()))
        return helpers.head_importance(model, [case.batch], loss_fn=case.loss, gates=gates, progress=False)

    def evaluate(m):
        return float(case.run(m, case.batch).detach().double().sum())

    curve, order = reestimated_curve(
        case.model, pool, importance=importance, evaluate=evaluate, step=0.25, progress=False
    )
    assert seen_masked == [0, 2, 4, 6]  # before each step, the heads pruned so far are masked
    assert sorted(order) == sorted(pool)
    # the first step is the one-shot importance order; each curve point is that prefix masked
    first = order_by_importance(
        helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, progress=False), pool
    )
    assert order[:2] == first[:2]
    assert (
        curve["score"].tolist()
        == pruning_curve(case.model, order, evaluate, step=0.25, progress=False)["score"].tolist()
    )


@pytest.mark.parametrize("beam", [1, 2])
def test_a_translation_curve_scored_many_steps_per_search_equals_one_step_at_a_time(beam):
    """translation_scorer's ``many`` puts several steps (head specs across layers and kinds) in one
    search; pruning_curve then gives exactly the curve of masking and decoding step by step."""
    from helpers.zoo.scorers import translation_scorer
    from helpers.zoo.translation_model import TranslationConfig, model_for, translate
    from helpers.zoo.translation_task import generate

    data = generate({"train": 40}, seed=2)["train"]
    torch.manual_seed(1)
    model = model_for(data, TranslationConfig(layers=2, heads=4, embed_dim=16, ffn_dim=32)).eval()
    order = random_order(heads_of(model), seed=5)
    # references = the unmasked model's own output, so BLEU is 100 unmasked and every changed word shows
    # outputs up to the source's length + 8 tokens (max_len_a 1): long enough for masks to show
    own = translate(model, [p.src for p in data[:7]], beam=beam, batch_size=3, max_len_a=1.0, max_len_b=8)
    pairs = [dataclasses.replace(p, ref=hyp) for p, hyp in zip(data[:7], own)]
    score = translation_scorer(pairs, beam=beam, batch_size=3, max_len_a=1.0, max_len_b=8, configs_per_pass=4)
    batched = pruning_curve(model, order, score, progress=False)
    one_by_one = pruning_curve(model, order, lambda m: score(m), progress=False)  # a plain function: no `many`
    pd.testing.assert_frame_equal(batched, one_by_one)
    assert (
        batched["score"].iloc[0] == pytest.approx(100) and batched["score"].nunique() > 3
    )  # the masks changed the output


@pytest.mark.parametrize("with_many", [False, True])
def test_curves_of_several_orders_equal_one_curve_each_and_score_shared_steps_once(with_many):
    case = bert(layers=2, heads=4)
    pool = heads_of(case.model)
    orders = {
        "importance": order_by_importance(
            helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, progress=False), pool
        ),
        "random 0": random_order(pool, 0),
        "random 1": random_order(pool, 1),
        "layer 0": pool[:4],
    }
    masked = []

    def evaluate(m):
        return float(case.run(m, case.batch).detach().double().sum())

    class Many:
        def __call__(self, m):
            return evaluate(m)

        def many(self, m, specs):
            masked.extend(specs)
            out = []
            with helpers.HeadGates(m) as gates:
                for spec in specs:
                    gates.reset()
                    gates.mask(spec)
                    out.append(evaluate(m))
            return out

    counting = Many() if with_many else (lambda m: masked.append(None) or evaluate(m))
    with torch.no_grad():
        together = pruning_curves(case.model, orders, evaluate=counting, step=0.25, progress=False)
        for label, order in orders.items():
            alone = pruning_curve(case.model, order, evaluate, step=0.25, progress=False).assign(order=label)
            pd.testing.assert_frame_equal(together[together["order"] == label].reset_index(drop=True), alone)
    # 4 curves of 5 steps: every curve starts with no head masked, the first three end with all 8
    distinct = {frozenset(order[:c]) for order in orders.values() for c in counts(len(order), 0.25)}
    assert len(together) == 20 and len(masked) == len(distinct) <= 20 - 3 - 2
    specs = [{"self": {0: [1, 0]}}, {"self": {0: [0, 1]}}, {}, {"self": {1: [2]}}]
    with torch.no_grad():
        scores = score_specs(case.model, specs, evaluate=evaluate, progress=False)
    assert scores[0] == scores[1] != scores[2] != scores[3]  # the same heads in another order: scored once
