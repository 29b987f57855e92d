"""The liveness check: |V_h|·|O_h| per head, computed independently from the weights; a head that
training (or a test) zeroed is named, and masking it changes nothing; living heads are not."""

import pytest
import torch
from tiny_models import ALL_CASES, GQA_CASES, bert, gpt2

import helpers
from helpers.heads.liveness import DEAD_FLOOR, dead_heads, head_norms
from helpers.heads.sites import attention_sites

CASES = sorted(ALL_CASES)


def _kill(model, kind: str, layer: int, head: int) -> None:
    """Zero head ``head``'s columns of W_o (rows of a GPT-2 Conv1D, whose weight is [in, out])."""
    site = next(s for s in attention_sites(model) if (s.kind, s.layer) == (kind, layer))
    d = site.head_dim
    with torch.no_grad():
        weight = site.output.weight
        (
            weight[:, head * d : (head + 1) * d]
            if isinstance(site.output, torch.nn.Linear)
            else weight[head * d : (head + 1) * d]
        ).zero_()


@pytest.mark.parametrize("name", CASES)
def test_a_killed_head_is_named_and_masking_it_changes_nothing(name):
    case = ALL_CASES[name]()
    assert dead_heads(head_norms(case.model)) == []  # a freshly initialised model: every head alive
    kind = case.kinds[-1]
    _kill(case.model, kind, 1, 2)
    named = dead_heads(head_norms(case.model))
    assert [d.head for d in named] == [(kind, 1, 2)] and named[0].norm == 0.0 and named[0].share == 0.0
    # the independent truth: a head the check calls dead is one whose zero gate changes no output
    expected = case.run(case.model, case.batch)
    with helpers.HeadGates(case.model) as gates:
        gates.mask({kind: {1: [2]}})
        torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=1e-5, atol=1e-6)


def _with_bias(rows: torch.Tensor, bias: torch.Tensor) -> float:
    return float((rows.norm() ** 2 + bias.norm() ** 2).sqrt())


def test_the_norms_are_the_value_rows_and_bias_times_the_output_columns():
    """Recomputed from BERT's named weights, and from GPT-2's fused Conv1D c_attn (value: its last
    third), the value bias counted with the value rows."""
    model = bert().model
    layer = model.bert.encoder.layer[1]
    value, o, d = layer.attention.self.value, layer.attention.output.dense.weight.detach(), 4
    with torch.no_grad():
        value.bias.normal_()  # a freshly initialised BERT's biases are zero
    v, b = value.weight.detach(), value.bias.detach()
    heads = [slice(h * d, (h + 1) * d) for h in range(4)]
    expected = [_with_bias(v[h], b[h]) * float(o[:, h].norm()) for h in heads]
    assert head_norms(model)["self"][1].tolist() == pytest.approx(expected, rel=1e-6)
    model = gpt2().model
    block = model.transformer.h[0].attn
    width = block.c_proj.weight.shape[0]
    with torch.no_grad():
        block.c_attn.bias.normal_()
    v, o = block.c_attn.weight.detach()[:, 2 * width :], block.c_proj.weight.detach()  # Conv1D: [in, out]
    b = block.c_attn.bias.detach()[2 * width :]
    expected = [_with_bias(v[:, h], b[h]) * float(o[h].norm()) for h in heads]
    assert head_norms(model)["self"][0].tolist() == pytest.approx(expected, rel=1e-6)


def test_a_head_with_no_value_weights_but_a_value_bias_is_alive():
    """Zeroing V_h's weights leaves O_h · b_h, which masking takes away: not dead. Zeroing its
    bias too leaves nothing: named, and masking it changes no output."""
    case = bert()
    value = case.model.bert.encoder.layer[1].attention.self.value
    rows = slice(2 * 4, 3 * 4)  # head 2 of 4, head_dim 4
    with torch.no_grad():
        value.bias.normal_()
        value.weight[rows].zero_()
    assert dead_heads(case.model) == []
    expected = case.run(case.model, case.batch)
    with helpers.HeadGates(case.model) as gates:
        gates.mask({"self": {1: [2]}})
        assert not torch.allclose(case.run(case.model, case.batch), expected)
    with torch.no_grad():
        value.bias[rows].zero_()
    assert [d.head for d in dead_heads(case.model)] == [("self", 1, 2)]
    expected = case.run(case.model, case.batch)
    with helpers.HeadGates(case.model) as gates:
        gates.mask({"self": {1: [2]}})
        torch.testing.assert_close(case.run(case.model, case.batch), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(GQA_CASES))
def test_query_heads_of_a_kv_group_share_its_value_rows(name):
    """Under grouped-query attention V_h is the group's: zeroing a group's value rows kills its
    query heads together (2 per group in the tiny models), and no other."""
    model = ALL_CASES[name]().model
    site = attention_sites(model)[0]
    with torch.no_grad():
        site.value.weight[site.head_dim : 2 * site.head_dim].zero_()  # KV group 1: query heads 2 and 3
    assert [d.head for d in dead_heads(head_norms(model))] == [("self", 0, 2), ("self", 0, 3)]


def test_a_pruned_head_has_no_norm_and_the_others_keep_theirs():
    model = bert().model
    before = head_norms(model)["self"]
    helpers.prune_heads(model, {"self": {0: [1]}})
    after = head_norms(model)["self"]
    assert torch.isnan(after[0, 1]) and dead_heads({"self": after}) == []
    keep = ~torch.isnan(after)
    assert torch.equal(after[keep], before[keep])


def test_the_floor_is_a_share_of_the_kinds_largest_head():
    norms = {"enc_self": torch.tensor([[10.0, 0.2], [0.09, 5.0]]), "dec_self": torch.tensor([[0.05, 0.1]])}
    assert [d.head for d in dead_heads(norms)] == [("enc_self", 1, 0)]  # 0.09 < 1% of 10; 0.05 is half of 0.1
    # at 3%, dec_self's largest (0.1) is below 3% of the model's largest (10): the whole kind is named
    assert [d.head for d in dead_heads(norms, floor=0.03)] == [
        ("enc_self", 0, 1),
        ("enc_self", 1, 0),
        ("dec_self", 0, 0),
        ("dec_self", 0, 1),
    ]
    assert [d.head for d in dead_heads({"self": torch.zeros(1, 2)})] == [("self", 0, 0), ("self", 0, 1)]
    # a kind that died whole: its largest is below 1% of the model's largest, so all its heads are named
    whole = {"enc_self": torch.tensor([[10.0, 8.0]]), "dec_self": torch.tensor([[0.05, 0.09], [0.08, float("nan")]])}
    assert [d.head for d in dead_heads(whole)] == [("dec_self", 0, 0), ("dec_self", 0, 1), ("dec_self", 1, 0)]
    assert DEAD_FLOOR == 0.01
    with pytest.raises(ValueError, match="between 0 and 1"):
        dead_heads(norms, floor=1.5)
