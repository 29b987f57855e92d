"""KV-cache configurations (chapter 14) against independent truths, on a tiny float32 Llama:

* every fast teacher-forced pass gives the log-probabilities of the real cache read one position
  at a time, as generation reads it (windowed heads: a per-head mask against a cache that drops
  entries; quantized caches: chunks against single positions);
* the bytes every real cache object holds, at its largest, equal the arithmetic, for every kind,
  on a model pruned unevenly down to a layer with no head left as well;
* limits that must change nothing change nothing (a window wider than the text, a heavy-hitter
  budget above its length), and the policies keep what they say they keep.
"""

from __future__ import annotations

import pytest
import torch

from helpers.heads.sites import UnsupportedModelError
from helpers.kv.budget import CacheSpec, fast_run, predicted_peak_bytes, prompt_pass, pruned_copy, real_run
from helpers.kv.quantized import quantized_cache, stored_bytes
from helpers.kv.selective import HeadGroup, HeavyHitters, SelectiveCache, SinkWindow, selective_attention

PROMPT, TOTAL, BATCH = 11, 37, 2


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        initializer_range=0.3,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 64, (BATCH, TOTAL), generator=torch.Generator().manual_seed(1))


def _logp(model, hidden):
    return model.lm_head(hidden).log_softmax(-1)


def _plain_logp(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits[:, PROMPT:].log_softmax(-1)


WINDOW = CacheSpec("window", sinks=2, window=5, full=((True, False), (False, False), (False, True)))
SPECS = {
    "plain": CacheSpec(),
    "window": WINDOW,
    "evict": CacheSpec("evict", budget=9, recent=3),
    "fp8": CacheSpec("fp8"),
    "4-bit": CacheSpec("quanto", bits=4, residual=6),
    "2-bit": CacheSpec("quanto", bits=2, residual=6),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_the_fast_pass_gives_the_real_caches_log_probabilities(model, ids, name):
    spec = SPECS[name]
    real, _ = real_run(model, ids, PROMPT, spec)
    fast = fast_run(model, ids, prompt_pass(model, ids, PROMPT), spec)
    torch.testing.assert_close(_logp(model, fast), _logp(model, real), atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", list(SPECS))
def test_the_bytes_a_real_cache_holds_equal_the_arithmetic(model, ids, name):
    spec = SPECS[name]
    _, measured = real_run(model, ids, PROMPT, spec)
    assert measured == predicted_peak_bytes(model, spec, prompt=PROMPT, total=TOTAL, batch=BATCH, element=4)


@pytest.mark.parametrize("name", ["plain", "fp8", "4-bit", "2-bit"])
def test_removed_groups_and_quantized_caches_compose_to_the_predicted_bytes(model, ids, name):
    # layer 0 loses every head (a phantom entry stays), layer 1 one of its two KV groups, unevenly
    pruned = pruned_copy(model, [("self", 0, h) for h in range(4)] + [("self", 1, 0), ("self", 1, 1), ("self", 1, 2)])
    spec = SPECS[name]
    real, measured = real_run(pruned, ids, PROMPT, spec)
    assert measured == predicted_peak_bytes(pruned, spec, prompt=PROMPT, total=TOTAL, batch=BATCH, element=4)
    fast = fast_run(pruned, ids, prompt_pass(pruned, ids, PROMPT), spec)
    torch.testing.assert_close(_logp(pruned, fast), _logp(pruned, real), atol=1e-4, rtol=0)
    full, _ = real_run(model, ids, PROMPT, spec)
    assert measured < real_run(model, ids, PROMPT, spec)[1] and not torch.allclose(full, real)


def test_the_cache_changes_the_model_where_it_forgets(model, ids):
    plain = _plain_logp(model, ids)
    for name in ("window", "evict", "2-bit"):
        real, _ = real_run(model, ids, PROMPT, SPECS[name])
        assert (_logp(model, real) - plain).abs().max() > 1e-3, name


def test_limits_beyond_the_text_change_nothing(model, ids):
    plain = _plain_logp(model, ids)
    wide = CacheSpec("window", sinks=2, window=TOTAL, full=((False, False),) * 3)
    roomy = CacheSpec("evict", budget=TOTAL, recent=2)
    for spec in (CacheSpec(), wide, roomy):
        real, _ = real_run(model, ids, PROMPT, spec)
        torch.testing.assert_close(_logp(model, real), plain, atol=1e-4, rtol=0)


def test_a_windowed_head_keeps_its_sinks_and_its_window():
    group = HeadGroup([0], SinkWindow(sinks=2, window=3))
    positions = torch.arange(10, dtype=torch.float32).view(1, 1, 10, 1)
    group.append(positions.expand(1, 1, 10, 1), positions.expand(1, 1, 10, 1))
    group.trim()
    assert group.keys.flatten().tolist() == [0, 1, 7, 8, 9]


def test_heavy_hitters_keep_the_most_attended_and_the_recent():
    group = HeadGroup([0, 1], HeavyHitters(budget=4, recent=2))
    values = torch.arange(8, dtype=torch.float32).view(1, 1, 8, 1).expand(1, 2, 8, 1)
    group.append(values, values)
    probs = torch.zeros(1, 4, 1, 8)  # query heads 0, 1 read KV head 0; 2, 3 read KV head 1; one query
    probs[0, :2, 0, [1, 4]] = 0.5  # KV head 0: positions 1 and 4 attended most
    probs[0, 2:, 0, [0, 2]] = 0.5  # KV head 1: positions 0 and 2
    probs[0, :, 0, 5] = 0.01  # 5 a little: neither heavy nor recent
    group.observe(probs, 2)
    group.trim()
    assert group.keys[0, 0].flatten().tolist() == [1, 4, 6, 7]
    assert group.keys[0, 1].flatten().tolist() == [0, 2, 6, 7]
    assert group.scores.shape == (1, 2, 4)


def test_heavy_hitters_trim_each_row_and_head_by_its_own_scores():
    """Trimming copies rows with ``index_select``: every batch row and KV head keeps its own entries,
    the same values ``gather`` picks, in 16 bits as the chapter runs it."""
    torch.manual_seed(0)
    group = HeadGroup([0, 1, 2], HeavyHitters(budget=5, recent=2))
    keys, values = torch.randn(4, 3, 9, 8).bfloat16(), torch.randn(4, 3, 9, 8).bfloat16()
    group.append(keys, values)
    group.scores += torch.rand(4, 3, 9)
    heavy = group.scores[..., :7].topk(3, -1).indices.sort(-1).values
    index = torch.cat([heavy, torch.tensor([7, 8]).expand(4, 3, 2)], -1)
    group.trim()
    assert len({tuple(r) for r in index.view(-1, 5).tolist()}) > 1  # the rows do keep different entries
    assert torch.equal(group.keys, keys.gather(2, index.unsqueeze(-1).expand(-1, -1, -1, 8)))
    assert torch.equal(group.values, values.gather(2, index.unsqueeze(-1).expand(-1, -1, -1, 8)))


def test_bad_configurations_are_refused_with_what_to_do(model, ids):
    with pytest.raises(ValueError, match="heavy hitters need"):
        HeavyHitters(budget=3, recent=4)
    with pytest.raises(ValueError, match="2 or 4 bits"):
        quantized_cache(model, 3)
    with pytest.raises(ValueError, match="unknown cache kind"):
        CacheSpec("zip")
    cache = SelectiveCache([[SinkWindow(1, 2)] * 3] * 3)  # three policies for a layer of two KV heads
    with pytest.raises(ValueError, match="one policy per KV head"), selective_attention(model, cache):
        model(input_ids=ids[:, :4], past_key_values=cache, use_cache=True)


def test_selective_caches_name_the_families_they_support():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_embd=16, n_layer=1, n_head=2, n_positions=16)).eval()
    with (
        pytest.raises(UnsupportedModelError, match="Llama family"),
        selective_attention(gpt2, SelectiveCache([[SinkWindow(1, 1)]])),
    ):
        pass


def test_stored_bytes_counts_every_part_of_a_quantized_cache(model, ids):
    cache = quantized_cache(model, 4, residual_length=100)
    with torch.no_grad():
        model(input_ids=ids[:, :8], past_key_values=cache, use_cache=True)  # the prompt: quantized
        model(input_ids=ids[:, 8:9], past_key_values=cache, use_cache=True)  # one position in the residual
    layer = cache.layers[0]
    codes = layer._quantized_keys
    names, _ = codes.__tensor_flatten__()
    assert {"_data", "_scale", "_shift"} <= set(names)
    per_layer = stored_bytes(cache) // 3
    # 2 x (B*2 heads*8 positions groups of 8: codes packed 2 a byte, scale and zero point in float32) + residual
    groups = BATCH * 2 * 8
    assert per_layer == 2 * (groups // 2 * 8 + 2 * groups * 4 + BATCH * 2 * 1 * 8 * 4)


def test_the_layers_a_removal_would_leave_are_counted_without_pruning(model):
    from helpers.kv.budget import entries_after
    from helpers.kv.cache import layer_entries

    for removed in (
        [],
        [("self", 0, h) for h in range(4)] + [("self", 1, 0), ("self", 1, 1), ("self", 1, 2)],
        [("self", 2, 1)],
    ):
        assert entries_after(model, removed) == layer_entries(pruned_copy(model, removed))


def test_setup_has_compiled_quantos_extension_where_it_looks_for_it():
    """``make setup`` compiles quanto's CPU extension (build_backend), so a chapter only loads it:
    the compiled library is in the folder quanto checks, built for this torch, and it unpacks
    2-bit codes (4 a byte) into the numbers they pack."""
    from pathlib import Path

    from helpers.kv.quantized import build_backend

    folder = Path(build_backend())
    assert (folder / "quanto_cpp.so").is_file()
    assert (folder / "pytorch_version.txt").read_text().strip() == torch.__version__
    packed = torch.tensor([[0b11100100]], dtype=torch.uint8)  # 0, 1, 2, 3 from the low bits up
    unpacked = torch.ops.quanto.unpack(packed, 2)  # one row per 2-bit slot
    assert unpacked.flatten().tolist() == [0, 1, 2, 3]
