"""FLOP counts match the closed-form count of a BERT layer, before and after pruning heads."""

import pytest
import torch
from tiny_models import bert, gpt2, llama

import helpers
from helpers.sweeps.throughput import forward_flops, median_iqr, throughput


def _bert_flops(batch, seq, layers, hidden, heads, head_dim, ffn, labels, kept):
    """Closed form: Q, K, V and W_o, the FFN, Q K^T and A V, per layer; pooler and classifier on [CLS]."""
    tokens = batch * seq
    per_layer = [
        2 * tokens * (3 * hidden * h * head_dim + h * head_dim * hidden + 2 * hidden * ffn)
        + 4 * tokens * seq * h * head_dim
        for h in kept
    ]
    assert len(per_layer) == layers
    return sum(per_layer) + 2 * batch * (hidden * hidden + hidden * labels)


def test_flops_of_a_tiny_bert_before_and_after_pruning():
    case = bert(layers=2, heads=4, hidden=16)
    config = case.model.config
    b, t = case.batch["input_ids"].shape
    shape = dict(
        batch=b,
        seq=t,
        layers=2,
        hidden=16,
        heads=4,
        head_dim=4,
        ffn=config.intermediate_size,
        labels=config.num_labels,
    )
    assert forward_flops(case.model, case.batch, case.run) == _bert_flops(**shape, kept=[4, 4])
    helpers.prune_heads(case.model, {"self": {0: [0, 1], 1: [0, 1, 2, 3]}})
    assert forward_flops(case.model, case.batch, case.run) == _bert_flops(**shape, kept=[2, 0])


def _decoder_only_flops(tokens, seq, hidden, head_dim, ffn_mats, ffn, vocab, kept_q, kept_kv):
    """Closed form per layer: Q and W_o per query head, K and V per key/value head, the FFN's
    matrices, Q K^T and A V per query head; then the LM head. A layer with no head left runs its
    FFN only."""
    total = 0
    for q, kv in zip(kept_q, kept_kv):
        total += 2 * tokens * ffn_mats * hidden * ffn
        if q:
            total += 2 * tokens * (hidden * (q + 2 * kv) * head_dim + q * head_dim * hidden)
            total += 4 * tokens * seq * q * head_dim
    return total + 2 * tokens * hidden * vocab


@pytest.mark.parametrize("build, ffn_mats, kv_heads", [(gpt2, 2, 4), (llama, 3, 2)], ids=["gpt2", "llama-gqa"])
def test_flops_of_decoder_only_models_before_and_after_pruning(build, ffn_mats, kv_heads):
    case = build()
    b, t = case.batch["input_ids"].shape
    shape = dict(tokens=b * t, seq=t, hidden=16, head_dim=4, ffn_mats=ffn_mats, ffn=32, vocab=40)
    assert forward_flops(case.model, case.batch, case.run) == _decoder_only_flops(
        **shape, kept_q=[4, 4], kept_kv=[kv_heads, kv_heads]
    )
    helpers.prune_heads(case.model, {"self": {0: [0, 1, 2], 1: [0, 1, 2, 3]}})
    # layer 0 keeps query head 3: GPT-2 keeps its one K/V head; under GQA KV head 1 stays, KV head 0 goes
    assert forward_flops(case.model, case.batch, case.run) == _decoder_only_flops(
        **shape, kept_q=[1, 0], kept_kv=[1, 0]
    )


def test_throughput_returns_one_rate_per_repeat():
    case = bert()
    rates = throughput(case.model, [case.batch, case.batch], forward=case.run, repeats=3, warmup=1)
    assert len(rates) == 3 and all(r > 0 for r in rates)
    calls = []
    throughput(case.model, [case.batch, case.batch], forward=lambda m, b: calls.append(1), repeats=3, warmup=2)
    assert len(calls) == (2 + 3) * 2  # the warm-up passes run, untimed: three rates come back


def test_one_disturbed_run_barely_moves_the_median():
    # chapter 07's course build of cc5739f: the unpruned model's five runs at batch 1
    runs = [16.0, 146.0, 146.0, 141.0, 143.0]
    median, iqr = median_iqr(runs)
    assert median == 143.0 and iqr == 146.0 - 141.0  # the mean, 118.4, would be below four of the five runs
    assert median_iqr([7.0]) == (7.0, 0.0)


def test_compare_speed_measures_three_variants_and_counts_fewer_flops_when_pruned():
    import copy

    from helpers.sweeps.throughput import compare_speed

    case = bert(layers=2, heads=4, hidden=16)
    spec = {"self": {0: [0, 1], 1: [2, 3]}}
    pruned = copy.deepcopy(case.model)
    helpers.prune_heads(pruned, spec)
    before = case.run(case.model, case.batch).detach()
    table = compare_speed(
        case.model, pruned, masked=spec, batches_by_size={4: [case.batch]}, forward=case.run, repeats=2, progress=False
    )
    assert list(table["variant"]) == ["original", "pruned", "gated"]
    assert all(len(r) == 2 for r in table["runs"]) and (table["median"] > 0).all()
    for row in table.to_dict("records"):  # the summary is recomputed from the raw rates
        assert row["median"] == pytest.approx(sum(row["runs"]) / 2) and row["iqr"] == pytest.approx(
            abs(row["runs"][0] - row["runs"][1]) / 2
        )
    assert set(table["dtype"]) == {"float32"} and set(table["compile_mode"]) == {"eager"}
    flops = table.set_index("variant")["flops"]
    assert flops["pruned"] < flops["original"] == flops["gated"]
    # the variants were copies: the original has no hooks left and computes what it did before
    assert torch.equal(case.run(case.model, case.batch).detach(), before)
    assert not any(m._forward_pre_hooks for m in case.model.modules())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_compare_speed_times_copies_in_another_dtype_and_leaves_the_models_alone(dtype):
    import copy

    from helpers.sweeps.throughput import compare_speed

    case = bert(layers=2, heads=4, hidden=16)
    spec = {"self": {0: [1], 1: [0, 3]}}
    pruned = copy.deepcopy(case.model)
    helpers.prune_heads(pruned, spec)
    table = compare_speed(
        case.model,
        pruned,
        masked=spec,
        batches_by_size={2: [case.batch]},
        forward=case.run,
        repeats=1,
        progress=False,
        dtype=dtype,
    )
    assert set(table["dtype"]) == {dtype} and (table["median"] > 0).all()
    assert {p.dtype for p in case.model.parameters()} == {p.dtype for p in pruned.parameters()} == {torch.float32}


def test_a_compiled_gated_model_computes_the_eager_gated_function():
    """The gate hooks are traced by torch.compile (backend "eager": dynamo without code generation,
    quick on a CPU); after the gates change, the compiled model follows them."""
    from helpers.sweeps.throughput import compiled

    case = bert(layers=2, heads=4, hidden=16)
    with torch.inference_mode(), helpers.HeadGates(case.model) as gates:
        fast = compiled(case.model, "default", backend="eager")
        for spec in ({"self": {0: [1]}}, {"self": {0: [0, 2], 1: [3]}}, {}):
            gates.reset()
            gates.mask(spec)
            assert torch.equal(fast(**case.batch).logits, case.model(**case.batch).logits)
        gates.mask({"self": {1: [0, 1, 2, 3]}})
        masked = fast(**case.batch).logits
        gates.reset()
        assert not torch.equal(fast(**case.batch).logits, masked)


def test_speed_gains_recomputed_from_rates_and_flops():
    import pandas as pd

    from helpers.sweeps.throughput import speed_gains

    rows = [
        dict(dtype="float16", compile_mode="eager", batch_size=64, variant=v, median=m, flops=f)
        for v, m, f in (("original", 100.0, 300), ("pruned", 110.0, 200), ("gated", 95.0, 300))
    ]
    (gain,) = speed_gains(pd.DataFrame(rows)).to_dict("records")
    assert gain["pruned"] == pytest.approx(0.10) and gain["gated"] == pytest.approx(-0.05)
    assert gain["predicted"] == pytest.approx(0.5) and gain["share_of_predicted"] == pytest.approx(0.2)
    assert (gain["dtype"], gain["compile_mode"], gain["batch_size"]) == ("float16", "eager", 64)


def test_an_unknown_dtype_is_a_clear_error():
    from helpers.sweeps.throughput import dtype_of

    with pytest.raises(ValueError, match="unknown dtype 'half'.*bfloat16"):
        dtype_of("half")
