"""Sites are found for every family; gates of ones change nothing; hooks go away on exit."""

import pytest
import torch
from tiny_models import ALL_CASES, GQA_CASES, bert

import helpers
from helpers.heads.sites import HeadSpecError

CASES = sorted(ALL_CASES)


@pytest.fixture(params=CASES)
def case(request):
    return ALL_CASES[request.param]()


def test_sites_cover_every_layer_and_kind(case):
    sites = helpers.attention_sites(case.model)
    kinds = {s.kind for s in sites}
    assert kinds == set(case.kinds)
    for kind in case.kinds:
        layers = [s.layer for s in sites if s.kind == kind]
        assert layers == [0, 1]
    for s in sites:
        assert (s.num_heads, s.total_heads, s.head_dim) == (4, 4, 4)
        if s.fused_qkv:  # GPT-2's Conv1D c_attn, weight [in, 3 * heads * head_dim]; c_proj weight [in, out]
            assert s.query.weight.shape[1] == 3 * s.num_heads * s.head_dim == 3 * s.output.weight.shape[0]
        else:
            assert s.query.out_features == s.num_heads * s.head_dim == s.output.in_features
            assert s.key.out_features == s.value.out_features == len(s.kv_groups) * s.head_dim
        assert s.group_size == (2 if case.name in GQA_CASES else 1)
        assert s.kv_groups == list(range(4 // s.group_size))
    assert helpers.head_grid(case.model) == {k: (2, 4) for k in case.kinds}


def test_gates_of_ones_are_bit_identical(case):
    expected = case.run(case.model, case.batch)
    with helpers.HeadGates(case.model) as gates:
        assert set(gates.kinds) == set(case.kinds)
        assert all(gates.tensor(k).shape == (2, 4) for k in case.kinds)
        got = case.run(case.model, case.batch)
    assert torch.equal(got, expected)


def test_gates_requiring_grad_keep_outputs(case):
    expected = case.run(case.model, case.batch)
    with helpers.HeadGates(case.model, requires_grad=True):
        got = case.run(case.model, case.batch)
    if case.name.startswith("fairseq"):
        # gradient-carrying gates route fairseq through its explicit (non-fused) attention path
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    else:
        assert torch.equal(got, expected)


def test_hooks_are_removed_on_exit(case):
    expected = case.run(case.model, case.batch)
    with helpers.HeadGates(case.model) as gates:
        for k in case.kinds:
            gates.tensor(k)[0, 1] = 0.0
        masked = case.run(case.model, case.batch)
    assert not torch.allclose(masked, expected)
    for s in helpers.attention_sites(case.model):
        assert not s.output._forward_pre_hooks and not s.module._forward_pre_hooks
        if s.family == "fairseq":
            assert s.module.skip_embed_dim_check is False
    assert torch.equal(case.run(case.model, case.batch), expected)


def test_gate_scales_the_head_output_linearly(case):
    """W_o's output is affine in xi_h: at xi = 0.5 it is the mean of its values at 0 and 1."""
    site = helpers.attention_sites(case.model)[-1]
    case.model.double()
    seen = []
    handle = site.output.register_forward_hook(lambda m, i, o: seen.append(o.detach().clone()))
    with helpers.HeadGates(case.model) as gates:
        gates.tensor(site.kind)[site.layer, 0] = 0.7  # keeps every family on its gated path at xi=1
        for xi in (0.0, 1.0, 0.5):
            gates.tensor(site.kind)[site.layer, 2] = xi
            case.run(case.model, case.batch)
    handle.remove()
    zero, one, half = seen[0], seen[1], seen[2]
    assert not torch.allclose(zero, one)
    torch.testing.assert_close(half, (zero + one) / 2, rtol=0, atol=1e-12)


def test_mask_helper_matches_editing_the_tensor():
    c = bert()
    with helpers.HeadGates(c.model) as gates:
        gates.mask({"self": {0: [1, 3], 1: [0]}})
        t = gates.tensor("self")
        assert t.tolist() == [[1, 0, 1, 0], [0, 1, 1, 1]]
        a = c.run(c.model, c.batch)
        gates.reset()
        assert torch.equal(t, torch.ones(2, 4))
        with torch.no_grad():
            t[0, 1] = t[0, 3] = t[1, 0] = 0
        b = c.run(c.model, c.batch)
    assert torch.equal(a, b)


def test_gates_cannot_be_installed_twice():
    c = bert()
    with helpers.HeadGates(c.model) as gates:
        with pytest.raises(RuntimeError, match="already installed"):
            gates.__enter__()


def test_recording_needs_installed_gates():
    gates = helpers.HeadGates(bert().model)
    with pytest.raises(RuntimeError, match="inside `with HeadGates"):
        with gates.recording():
            pass


def test_gates_follow_the_model_dtype():
    c = bert()
    c.model.double()
    with helpers.HeadGates(c.model) as gates:
        gates.tensor("self")[0, 0] = 0.0
        out = c.run(c.model, c.batch)
    assert out.dtype == torch.float64


def test_cached_gates_follow_every_edit_between_passes():
    """The hook caches each layer's gates; edits in place, mask(), reset() and pruning while the
    gates are installed must all reach the next pass (truth: fresh gates set the same way)."""
    c = bert(layers=2, heads=4, hidden=16)

    def fresh(spec, value=0.0):
        with torch.no_grad(), helpers.HeadGates(c.model) as g:
            g.mask(spec, value)
            return c.run(c.model, c.batch)

    expected = [fresh({"self": {0: [1]}}), fresh({"self": {0: [1]}}, 0.5), fresh({"self": {1: [0, 2]}})]
    with torch.no_grad(), helpers.HeadGates(c.model) as gates:
        gates.mask({"self": {0: [1]}})
        seen = [c.run(c.model, c.batch)]
        gates.tensor("self")[0, 1] = 0.5
        seen.append(c.run(c.model, c.batch))
        gates.reset()
        gates.mask({"self": {1: [0, 2]}})
        seen.append(c.run(c.model, c.batch))
        helpers.prune_heads(c.model, {"self": {1: [3]}})
        after = c.run(c.model, c.batch)
    assert all(torch.equal(a, b) for a, b in zip(seen, expected))
    assert list(helpers.attention_sites(c.model)[1].heads) == [0, 1, 2]
    assert torch.equal(after, fresh({"self": {1: [0, 2]}}))
    assert not torch.equal(after, expected[2])  # pruning head 3 did change the function


def test_gates_made_under_inference_mode_can_be_edited_and_used():
    c = bert(layers=2, heads=4, hidden=16)
    with torch.no_grad(), helpers.HeadGates(c.model) as gates:
        gates.mask({"self": {1: [2]}})
        expected = c.run(c.model, c.batch)
    with torch.inference_mode(), helpers.HeadGates(c.model) as gates:
        gates.mask({"self": {1: [2]}})
        assert torch.equal(c.run(c.model, c.batch), expected)


def test_unsupported_model_names_the_supported_families():
    from transformers import GPT2Config, GPT2LMHeadModel, OPTConfig, OPTForCausalLM

    opt = OPTForCausalLM(
        OPTConfig(
            num_hidden_layers=1,
            num_attention_heads=2,
            hidden_size=8,
            ffn_dim=16,
            word_embed_proj_dim=8,
            vocab_size=20,
            max_position_embeddings=16,
        )
    )
    cross = GPT2LMHeadModel(
        GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=20, n_positions=16, add_cross_attention=True)
    )
    for model in (opt, cross, torch.nn.Linear(3, 3)):
        with pytest.raises(helpers.UnsupportedModelError) as err:
            helpers.HeadGates(model)
        for family in ("BERT-like", "fairseq", "marian", "gpt2", "llama", "qwen3", "gemma3_text"):
            assert family in str(err.value)
    with pytest.raises(helpers.UnsupportedModelError, match="cross-attention"):
        helpers.prune_heads(cross, {"self": {0: [0]}})


def test_row_gates_give_each_example_its_own_heads():
    """Row r of a batch under row gates equals that example alone under the same gates."""
    from helpers.sweeps.config_batches import repeat_rows

    case = ALL_CASES["bert"]()
    model, batch = case.model, case.batch
    rows = len(case.run(model, batch))
    layers, heads = helpers.HeadGates(model).tensor("self").shape
    with helpers.HeadGates(model) as gates:
        plain = case.run(model, batch)
        with gates.rows({"self": torch.ones(2 * rows, layers, heads)}):
            assert torch.equal(
                case.run(model, repeat_rows(batch, 2)), torch.cat([plain, plain])
            )  # ones change nothing
        row_gates = torch.ones(2 * rows, layers, heads)
        row_gates[rows:, 1, 2] = 0.0
        with gates.rows({"self": row_gates}):
            both = case.run(model, repeat_rows(batch, 2))
        gates.mask({"self": {1: [2]}})
        masked = case.run(model, batch)
    assert torch.equal(both[:rows], plain) and torch.equal(both[rows:], masked)
    assert not torch.equal(masked, plain)


def test_row_gates_reject_bad_shapes_and_batches():
    from helpers.sweeps.config_batches import config_row_gates

    case = ALL_CASES["bert"]()
    with helpers.HeadGates(case.model) as gates:
        layers, heads = gates.tensor("self").shape
        with pytest.raises(HeadSpecError, match="rows x layers x heads"):
            with gates.rows({"self": torch.ones(3, layers + 1, heads)}):
                pass
        with gates.rows({"self": torch.zeros(3, layers, heads)}):
            with pytest.raises(HeadSpecError, match="repeat the batch once per configuration"):
                case.run(case.model, case.batch)  # 4 examples against 3 rows
            with pytest.raises(RuntimeError, match="do not nest"):
                with gates.rows({"self": torch.ones(3, layers, heads)}):
                    pass
        with pytest.raises(HeadSpecError, match="has no head 9"):
            config_row_gates(gates, [("self", 0, (9,))], 2)
    with pytest.raises(RuntimeError, match="inside `with HeadGates"):
        with helpers.HeadGates(case.model).rows({}):
            pass
