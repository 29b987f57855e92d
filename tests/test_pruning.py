"""Physical pruning equals zero gates, for every family and kind; pruned models round-trip."""

import pytest
import torch
from tiny_models import ALL_CASES, GQA_CASES, bert, fairseq_wmt, marian

import helpers
from helpers.heads.pruning import count_parameters

CASES = sorted(ALL_CASES)


@pytest.fixture(params=CASES)
def case(request):
    return ALL_CASES[request.param]()


def spec_for(kinds, whole_layer: bool):
    """Two heads of layer 0 of every kind; with whole_layer, also every head of layer 1."""
    spec = {k: {0: [1, 3]} for k in kinds}
    if whole_layer:
        for k in kinds:
            spec[k][1] = [0, 1, 2, 3]
    return spec


def gated_output(case, spec):
    with helpers.HeadGates(case.model) as gates:
        gates.mask(spec)
        return case.run(case.model, case.batch)


@pytest.mark.parametrize("whole_layer", [False, True], ids=["some-heads", "whole-layer"])
def test_zero_gate_equals_pruning(case, whole_layer):
    spec = spec_for(case.kinds, whole_layer)
    unpruned = case.run(case.model, case.batch)
    expected = gated_output(case, spec)
    before = count_parameters(case.model)
    kept = helpers.prune_heads(case.model, spec)
    got = case.run(case.model, case.batch)
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-5)
    assert (got - unpruned).abs().max() > 1e-3  # the removed heads mattered
    for k in case.kinds:
        assert kept[k][0] == [0, 2]
        assert kept[k][1] == ([] if whole_layer else [0, 1, 2, 3])
    removed_heads = sum(len(h) for layers in spec.values() for h in layers.values())
    # d_model 16, head size 4: a query head is 4 rows of Q (+ bias) and 4 columns of W_o; a key/value
    # head is 4 rows of K and of V (+ biases). Under GQA (2 query heads per KV head) layer 0 keeps
    # one head of each group, so only the whole layer's 2 KV heads go; otherwise one per head.
    d, bias = 16, int(helpers.attention_sites(case.model)[0].query.bias is not None)
    removed_kv = (2 * len(case.kinds) if whole_layer else 0) if case.name in GQA_CASES else removed_heads
    expected_drop = removed_heads * (4 * d + 4 * bias + 4 * d) + removed_kv * 2 * (4 * d + 4 * bias)
    assert before - count_parameters(case.model) == expected_drop


@pytest.mark.parametrize("kind_index", [0, 1, 2])
def test_each_seq2seq_kind_alone(kind_index):
    """Pruning one kind at a time (paper §5) matches gating that kind alone."""
    for build in (fairseq_wmt, marian):
        case = build()
        kind = case.kinds[kind_index]
        spec = {kind: {0: [0, 1, 2, 3], 1: [2]}}
        expected = gated_output(case, spec)
        helpers.prune_heads(case.model, spec)
        torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=0, atol=2e-5)


def test_pruning_twice_uses_original_numbering(case):
    spec_a = {k: {0: [1]} for k in case.kinds}
    spec_b = {k: {0: [3], 1: [0]} for k in case.kinds}
    both = {k: {0: [1, 3], 1: [0]} for k in case.kinds}
    expected = gated_output(case, both)
    helpers.prune_heads(case.model, spec_a)
    helpers.prune_heads(case.model, spec_b)
    torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=0, atol=2e-5)
    assert helpers.pruned_heads(case.model) == both


def test_gates_on_a_pruned_model_use_original_numbering(case):
    helpers.prune_heads(case.model, {k: {0: [1]} for k in case.kinds})
    with helpers.HeadGates(case.model) as gates:
        assert gates.tensor(case.kinds[0]).shape == (2, 4)
        gates.mask({k: {0: [3]} for k in case.kinds})
        gated = case.run(case.model, case.batch)
        gates.reset()
        gates.mask({k: {0: [1]} for k in case.kinds})  # an already removed head: no effect
        unchanged = case.run(case.model, case.batch)
    torch.testing.assert_close(unchanged, case.run(case.model, case.batch), rtol=0, atol=1e-5)
    helpers.prune_heads(case.model, {k: {0: [3]} for k in case.kinds})
    torch.testing.assert_close(case.run(case.model, case.batch), gated, rtol=0, atol=2e-5)


@pytest.mark.parametrize("whole_layer", [False, True], ids=["some-heads", "whole-layer"])
def test_save_and_load_round_trip(case, whole_layer, tmp_path):
    helpers.prune_heads(case.model, spec_for(case.kinds, whole_layer))
    expected = case.run(case.model, case.batch)
    helpers.save_pruned(case.model, tmp_path / "pruned")
    loaded = helpers.load_pruned(tmp_path / "pruned")
    assert type(loaded) is type(case.model)
    assert helpers.pruned_heads(loaded) == helpers.pruned_heads(case.model)
    assert torch.equal(case.run(loaded, case.batch), expected)
    # loading into a fresh unpruned model of the same architecture works too
    fresh = ALL_CASES[case.name]().model
    filled = helpers.load_pruned(tmp_path / "pruned", model=fresh)
    assert torch.equal(case.run(filled, case.batch), expected)


def test_fairseq_generation_matches_gated_model():
    """Incremental beam search (decoder caches) on the pruned model equals the gated model."""
    from fairseq.sequence_generator import SequenceGenerator

    case = fairseq_wmt()
    spec = {"enc_self": {0: [1]}, "enc_dec": {1: [0, 1, 2, 3], 0: [2]}, "dec_self": {0: [0, 1, 2, 3], 1: [3]}}
    sample = {"net_input": {"src_tokens": case.batch["src_tokens"], "src_lengths": case.batch["src_lengths"]}}
    tgt_dict = case.model.decoder.dictionary

    def generate(model):
        gen = SequenceGenerator([model], tgt_dict, beam_size=3, max_len_b=8)
        hyps = gen.generate([model], sample)
        return [(h[0]["tokens"].tolist(), round(float(h[0]["score"]), 4)) for h in hyps]

    with helpers.HeadGates(case.model) as gates:
        gates.mask(spec)
        expected = generate(case.model)
    helpers.prune_heads(case.model, spec)
    assert generate(case.model) == expected
    assert any(len(tokens) > 2 for tokens, _ in expected)


def test_transformers_generation_matches_gated_model():
    """generate() with the KV cache, including a decoder layer 0 with no head left."""
    case = marian()
    spec = {"enc_self": {1: [0]}, "enc_dec": {0: [0, 1, 2, 3]}, "dec_self": {0: [0, 1, 2, 3], 1: [2]}}
    kwargs = dict(
        input_ids=case.batch["input_ids"],
        attention_mask=case.batch["attention_mask"],
        max_new_tokens=6,
        num_beams=2,
        do_sample=False,
        min_new_tokens=6,
    )
    with helpers.HeadGates(case.model) as gates:
        gates.mask(spec)
        expected = case.model.generate(**kwargs)
    helpers.prune_heads(case.model, spec)
    got = case.model.generate(**kwargs)
    assert torch.equal(got, expected)
    assert got.shape[1] == 7


def test_pruned_attention_parameters_shrink_by_one_head_share():
    """One BERT head is 1/n_heads of Q, K, V rows and W_o columns (REFERENCE.md §1.2: ~8.34% for 12)."""
    case = bert(layers=1, heads=12, hidden=48)
    site = helpers.attention_sites(case.model)[0]
    attn = [site.query, site.key, site.value, site.output]
    before = sum(p.numel() for m in attn for p in m.parameters())
    helpers.prune_heads(case.model, {"self": {0: [5]}})
    after = sum(p.numel() for m in attn for p in m.parameters())
    share = (before - after) / before
    assert share == pytest.approx((3 * (48 * 4 + 4) + 48 * 4) / (4 * 48 * 48 + 4 * 48))
    assert 0.0825 < share < 0.0834


def test_pruning_while_gates_are_installed():
    """Pruning inside a HeadGates block leaves a model that runs, gated and after the gates go."""
    for build in (fairseq_wmt, bert):
        case = build()
        spec = {case.kinds[0]: {0: [0, 2]}}
        with helpers.HeadGates(case.model) as gates:
            gates.mask(spec)
            expected = case.run(case.model, case.batch)
            helpers.prune_heads(case.model, spec)
            torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=0, atol=2e-5)
        torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=0, atol=2e-5)


@pytest.mark.parametrize("whole_layer", [False, True], ids=["some-heads", "whole-layer"])
def test_a_pruned_copy_sharing_weights_equals_zero_gates_and_leaves_the_model_as_it_was(case, whole_layer):
    """``ablation.pruned_sharing_weights`` shares the model's weights and removes the spec's heads from the
    copy only: the copy computes what zero gates compute, the model what it computed before."""
    from helpers.sweeps.ablation import pruned_sharing_weights

    spec = spec_for(case.kinds, whole_layer)
    unpruned = case.run(case.model, case.batch)
    weights = {n: p.detach().clone() for n, p in case.model.named_parameters()}
    copy = pruned_sharing_weights(case.model, spec)
    torch.testing.assert_close(case.run(copy, case.batch), gated_output(case, spec), rtol=0, atol=2e-5)
    assert count_parameters(copy) < count_parameters(case.model)
    torch.testing.assert_close(case.run(case.model, case.batch), unpruned, rtol=0, atol=0)
    assert all(torch.equal(p, weights[n]) for n, p in case.model.named_parameters())
    from helpers.heads.pruning import pruned_heads

    assert not any(heads for layers in pruned_heads(case.model).values() for heads in layers.values())
    assert pruned_sharing_weights(case.model, {}) is case.model  # nothing removed: the model itself


@pytest.mark.parametrize("processes", [1, 2])
def test_pruned_passes_equal_gated_passes_in_order(processes):
    from helpers.sweeps.ablation import gated_passes, pruned_passes

    case = bert()
    specs = [{}, {"self": {0: [1]}}, {"self": {0: [0, 1, 2, 3], 1: [2]}}, {"self": {1: [0, 3]}}, {"self": {0: [3]}}]

    def run(model, copies, gated):
        with gated(len(case.batch["input_ids"]) * copies):
            out = case.run(model, {k: v.repeat(copies, *([1] * (v.dim() - 1))) for k, v in case.batch.items()})
        return list(out.chunk(copies))

    gated = list(gated_passes(case.model, specs, run=run, configs_per_pass=2, progress=False, processes=1))
    pruned = list(pruned_passes(case.model, specs, run=run, progress=False, processes=processes))
    assert [s for s, _ in pruned] == specs
    for (_, a), (_, b) in zip(gated, pruned):
        torch.testing.assert_close(b, a, rtol=0, atol=2e-5)
    assert (pruned[1][1] - pruned[0][1]).abs().max() > 1e-3  # the specs change the output
