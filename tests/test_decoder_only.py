"""Decoder-only LMs: GPT-2 and the Llama family with grouped-query attention (GQA).

The tiny GQA models have 4 query heads and 2 key/value heads per layer: query heads 0 and 1 read
KV head 0, heads 2 and 3 read KV head 1. The independent truths: the gated model (masking is
what pruning must reproduce), finite differences with a hook written here, and arithmetic on the
weight shapes.
"""

import pytest
import torch
from test_importance import EPS, fd_token, scaled_losses
from tiny_models import DECODER_ONLY_CASES, GQA_CASES, llama

import helpers
from helpers.heads.grouped_query import kv_groups_to_heads
from helpers.heads.sites import UNEVEN_GQA, HeadSpecError

DECODER_ONLY = sorted(DECODER_ONLY_CASES)
GQA = sorted(GQA_CASES)


def gated(case, spec, batch=None):
    with helpers.HeadGates(case.model) as gates:
        gates.mask(spec)
        return case.run(case.model, batch or case.batch)


# An uneven layer (group 0 keeps head 0, group 1 keeps 2 and 3) and a layer left with one group.
UNEVEN = {"self": {0: [1], 1: [2, 3]}}


@pytest.mark.parametrize("name", GQA)
def test_uneven_pruning_equals_gating_and_keeps_kv_heads_while_needed(name):
    case = GQA_CASES[name]()
    expected = gated(case, UNEVEN)
    helpers.prune_heads(case.model, UNEVEN)
    torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=0, atol=2e-5)
    s0, s1 = helpers.attention_sites(case.model)
    assert (s0.heads, s0.kv_groups, s1.heads, s1.kv_groups) == ([0, 2, 3], [0, 1], [0, 1], [0])
    assert s0.key.out_features == s0.value.out_features == 2 * 4  # both KV heads still read
    assert s1.key.out_features == s1.value.out_features == 1 * 4  # KV head 1 lost its last query head
    assert s0.module.config._attn_implementation == UNEVEN_GQA  # 1 + 2 query heads: routed
    assert s1.module.config._attn_implementation != UNEVEN_GQA  # 2 heads of one group: stock repeat_kv
    assert s1.module.num_key_value_groups == 2
    assert case.model.config._attn_implementation != UNEVEN_GQA  # the rest of the model is untouched


@pytest.mark.parametrize("name", GQA)
def test_pruning_whole_kv_groups(name):
    case = GQA_CASES[name]()
    expected = gated(case, {"self": {0: [2, 3], 1: [0, 1, 2, 3]}})
    kept = helpers.prune_kv_groups(case.model, {"self": {0: [1], 1: [0, 1]}})
    assert kept == {"self": {0: [0, 1], 1: []}}
    torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=0, atol=2e-5)
    s0 = helpers.attention_sites(case.model)[0]
    assert s0.kv_groups == [0] and s0.key.out_features == 4 and s0.module.num_key_value_groups == 2


def test_kv_group_errors_are_explained():
    case = llama()
    with pytest.raises(HeadSpecError, match=r"KV group 2 is out of range .* valid groups are 0..1"):
        helpers.prune_kv_groups(case.model, {"self": {0: [2]}})
    helpers.prune_kv_groups(case.model, {"self": {0: [1]}})
    with pytest.raises(HeadSpecError, match="KV group 1 of self layer 0 was already pruned"):
        kv_groups_to_heads(case.model, {"self": {0: [1]}})
    with pytest.raises(HeadSpecError, match="head 4 is out of range"):
        helpers.prune_heads(case.model, {"self": {1: [4]}})


def _generate(model, ids, **kw):
    return model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=6,
        min_new_tokens=6,
        do_sample=False,
        pad_token_id=0,
        **kw,
    )


@pytest.mark.parametrize("num_beams", [1, 2])
@pytest.mark.parametrize("name", DECODER_ONLY)
def test_generation_with_the_kv_cache_equals_the_gated_model(name, num_beams):
    """Layer 0 loses every head (a phantom cache entry keeps positions right); layer 1 is uneven."""
    case = DECODER_ONLY_CASES[name]()
    spec = {"self": {0: [0, 1, 2, 3], 1: [1]}}
    ids = case.batch["input_ids"][:2]  # no padding
    with helpers.HeadGates(case.model) as gates:
        gates.mask(spec)
        expected = _generate(case.model, ids, num_beams=num_beams)
    unmasked = _generate(case.model, ids, num_beams=num_beams)
    helpers.prune_heads(case.model, spec)
    got = _generate(case.model, ids, num_beams=num_beams)
    assert torch.equal(got, expected)
    assert got.shape[1] == ids.shape[1] + 6
    assert not torch.equal(expected, unmasked)  # the pruned heads mattered


@pytest.mark.parametrize("name", GQA)
def test_the_kv_cache_holds_only_kept_kv_heads(name):
    case = GQA_CASES[name]()
    helpers.prune_heads(case.model, {"self": {0: [2, 3], 1: [1]}})
    out = case.model(input_ids=case.batch["input_ids"], use_cache=True)
    keys = [layer.keys for layer in out.past_key_values.layers]
    assert keys[0].shape[1] == 1 and keys[1].shape[1] == 2


@pytest.mark.parametrize("name", GQA)
def test_uneven_pruned_model_round_trips(name, tmp_path):
    case = GQA_CASES[name]()
    helpers.prune_heads(case.model, UNEVEN)
    expected = case.run(case.model, case.batch)
    helpers.save_pruned(case.model, tmp_path / "pruned")
    loaded = helpers.load_pruned(tmp_path / "pruned")
    assert helpers.pruned_heads(loaded) == {"self": {0: [1], 1: [2, 3]}}
    assert torch.equal(case.run(loaded, case.batch), expected)


def _float64(case):
    """The model in float64 throughout: transformers' RMSNorms compute in float32 whatever the
    model's dtype, which would drown a finite difference; the same norm in the input's dtype."""
    case.model.double()
    for m in case.model.modules():
        if type(m).__name__.endswith("RMSNorm"):
            gemma = type(m).__name__.startswith("Gemma")  # Gemma scales by (1 + weight)
            eps = getattr(m, "eps", None) or m.variance_epsilon

            def forward(x, m=m, gemma=gemma, eps=eps):
                y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                return y * (1.0 + m.weight if gemma else m.weight)

            m.forward = forward
    return case


@pytest.mark.parametrize("name", DECODER_ONLY)
def test_importance_equals_finite_differences(name):
    case = _float64(DECODER_ONLY_CASES[name]())
    got = helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, normalize=None, progress=False)["self"]
    want = torch.zeros(2, 4, dtype=torch.float64)
    for site in helpers.attention_sites(case.model):
        for h in range(4):
            diff = scaled_losses(case, site, h, 1 + EPS) - scaled_losses(case, site, h, 1 - EPS)
            want[site.layer, h] = (diff / (2 * EPS)).abs().mean()
    assert (want > 1e-6).all()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-9)


def test_token_importance_equals_finite_differences_under_gqa():
    case = _float64(llama())
    got = helpers.head_importance(
        case.model, [case.batch], loss_fn=case.loss, normalize=None, abs_per="token", progress=False
    )
    torch.testing.assert_close(got["self"], fd_token(case)["self"], rtol=1e-6, atol=1e-9)


def test_kv_group_importance_sums_each_groups_query_heads():
    case = llama()
    scores = helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, normalize=None, progress=False)
    groups = helpers.kv_group_importance(case.model, scores)["self"]
    assert groups.shape == (2, 2)
    for layer in range(2):
        for g in range(2):
            assert groups[layer, g] == scores["self"][layer, 2 * g] + scores["self"][layer, 2 * g + 1]


@pytest.mark.parametrize("name", ["llama", "gemma3"])
def test_uneven_routing_follows_the_models_attention_implementation(name, monkeypatch):
    """The routed layer calls whatever implementation the model uses, here the family's eager one
    (Gemma's has its own softcapping), also when it is switched after pruning."""
    import sys

    case = GQA_CASES[name]()
    helpers.prune_heads(case.model, UNEVEN)
    case.model.set_attn_implementation("eager")
    case2 = GQA_CASES[name]()
    case2.model.set_attn_implementation("eager")
    expected = gated(case2, UNEVEN)
    family = sys.modules[type(helpers.attention_sites(case.model)[0].module).__module__]
    calls = []
    original = family.eager_attention_forward
    monkeypatch.setattr(family, "eager_attention_forward", lambda m, *a, **k: calls.append(m) or original(m, *a, **k))
    torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=0, atol=2e-5)
    assert helpers.attention_sites(case.model)[0].module in calls  # the routed layer 0 ran eager


def test_timings_name_the_device_the_model_ran_on(monkeypatch):
    """Chapter 11 labels its table and timings with the model's device, not with the device the
    course puts classifiers on: a language model left on the CPU of a GPU machine says "cpu"."""
    from helpers.book.chapters.ch11_nine_heads import describe

    monkeypatch.setenv("SIXTEEN_HEADS_DEVICE", "cuda:0")  # a GPU machine's default device
    assert describe(llama().model, "tiny")["device"].iloc[0].startswith("cpu: ")
