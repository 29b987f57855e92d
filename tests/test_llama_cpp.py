"""A pruned Llama written as GGUF (``gguf_export``) and run in llama.cpp (``llama_cpp``) computes
what transformers computes: greedy tokens equal and log-probabilities within 1e-3 nats in the
exact settings, for the unpruned model, an uneven pruning, a middle layer with no head and a first
layer with no head; the KV cache llama.cpp allocates equals the arithmetic in both settings; what
llama.cpp cannot hold is refused with a message that says what would work."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from helpers.heads import prune_heads, prune_kv_groups
from helpers.heads.sites import UnsupportedModelError, attention_sites
from helpers.serving.gguf_export import GgufExportError, export_gguf, layer_plan
from helpers.serving.llama_cpp import LlamaCpp, RuntimeSettings, predicted_kv_bytes
from helpers.zoo.shipped import smollm2_gguf

LOGPROB_TOLERANCE = 1e-3  # nats: float32 sums in another order, over a 49,152-token softmax
HEAD_DIM = 8
PROMPT = [504, 5897, 314, 441, 253, 1863, 282, 1463, 30, 657, 314, 253]


@pytest.fixture(scope="module")
def model():
    """4 layers of 6 query heads over 2 KV heads, SmolLM2's vocabulary (llama.cpp reads the
    tokenizer's size), weights wide enough that greedy choices are not near-ties."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        initializer_range=0.3,
        rope_theta=10000.0,
    )
    return LlamaForCausalLM(config).eval()


def _reference(model, ids, new_tokens=12):
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
        logprobs = torch.log_softmax(logits, -1)[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0].numpy()
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=0,
        )
    return out[0, len(ids) :].tolist(), logprobs


PRUNINGS = {
    "unpruned": {},
    "uneven": {0: [1], 1: [0, 1, 2], 3: [0, 3, 4]},  # groups left with 2 and 3, 3 and 0, 2 and 1 heads
    "middle layer empty": {2: list(range(6))},
    "first layer empty": {0: list(range(6)), 1: [5]},
}


WRITTEN = {  # per layer the query heads and KV heads written, and the zero heads added
    "unpruned": ([6, 6, 6, 6], [2, 2, 2, 2], 0),
    "uneven": ([6, 3, 6, 4], [2, 1, 2, 2], 2),  # 2+3 -> 3+3; 0+3 -> one group of 3; 2+1 -> 2+2
    "middle layer empty": ([6, 6, 0, 6], [2, 2, 0, 2], 0),
    "first layer empty": ([1, 6, 6, 6], [1, 2, 2, 2], 2),  # one zero head over one zero KV head; 3+2 -> 3+3
}


@pytest.mark.parametrize("name", list(PRUNINGS))
def test_llama_cpp_computes_what_transformers_computes_in_the_exact_settings(model, tmp_path, name):
    pruned = copy.deepcopy(model)
    if PRUNINGS[name]:
        prune_heads(pruned, {"self": PRUNINGS[name]})
    written = export_gguf(pruned, tmp_path / "m.gguf", tokenizer_gguf=smollm2_gguf(), pad_uneven=True)
    tokens, logprobs = _reference(pruned, PROMPT)
    with LlamaCpp(written.path, RuntimeSettings(threads=1, exact=True)) as run:
        assert run.greedy(PROMPT, len(tokens)) == tokens
        assert np.abs(run.token_logprobs(PROMPT) - logprobs).max() < LOGPROB_TOLERANCE
        keys, values = predicted_kv_bytes(
            written.kv_heads, HEAD_DIM, cells=run.cells, cache_type=run.cache_type, flash_attention=run.flash_attention
        )
        assert (run.k_mib, run.v_mib) == (round(keys / 2**20, 2), round(values / 2**20, 2))
    assert (written.heads, written.kv_heads, written.padded_heads) == WRITTEN[name]


def test_the_cache_llama_cpp_allocates_is_the_arithmetic_in_both_settings_and_pads_values_without_flash_attention(
    model, tmp_path
):
    pruned = copy.deepcopy(model)
    prune_kv_groups(pruned, {"self": {1: [0], 3: [1]}})  # KV heads per layer: 2, 1, 2, 1
    written = export_gguf(pruned, tmp_path / "kv.gguf", tokenizer_gguf=smollm2_gguf(), dtype="f16")
    assert written.kv_heads == [2, 1, 2, 1] and written.padded_heads == 0
    cells = RuntimeSettings().context  # 2,048 cells, although the model was trained on 256 positions
    seen = {}
    for exact in (True, False):
        with LlamaCpp(written.path, RuntimeSettings(threads=1, exact=exact)) as run:
            assert run.cells == cells and run.flash_attention is (not exact)
            seen[exact] = (run.k_mib, run.v_mib)
    per_head = HEAD_DIM * cells  # numbers per KV head and layer, for keys or for values
    assert seen[True] == (
        round(6 * per_head * 4 / 2**20, 2),
        round(4 * 2 * per_head * 4 / 2**20, 2),
    )  # values padded to 2 heads
    assert seen[False] == (round(6 * per_head * 2 / 2**20, 2), round(6 * per_head * 2 / 2**20, 2))


def test_layer_plan_evens_out_groups_with_zero_heads_only_when_asked(model):
    pruned = copy.deepcopy(model)
    prune_heads(pruned, {"self": {0: [1, 2]}})  # group 0 keeps head 0, group 1 keeps heads 3, 4, 5
    site = attention_sites(pruned)[0]
    with pytest.raises(GgufExportError, match="pad_uneven=True.*prune_kv_groups"):
        layer_plan(site)
    plan = layer_plan(site, pad_uneven=True)
    assert plan.query_rows == [0, None, None, 1, 2, 3] and plan.kv_rows == [0, 1]
    empty = copy.deepcopy(model)
    prune_heads(empty, {"self": {0: list(range(6))}})
    with pytest.raises(GgufExportError, match="first layer"):
        export_gguf(empty, "/nonexistent/never.gguf", tokenizer_gguf=smollm2_gguf())


def test_what_llama_cpp_cannot_compute_is_refused_before_anything_is_written(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16)).eval()
    with pytest.raises(UnsupportedModelError, match="model_type 'gpt2'.*convert_hf_to_gguf"):
        export_gguf(gpt2, tmp_path / "g.gguf", tokenizer_gguf=smollm2_gguf())
    biased = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=16,
            hidden_size=8,
            intermediate_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            attention_bias=True,
        )
    ).eval()
    with pytest.raises(UnsupportedModelError, match="biases"):
        export_gguf(biased, tmp_path / "b.gguf", tokenizer_gguf=smollm2_gguf())
    assert not list(tmp_path.iterdir())


def test_a_file_without_the_models_tokenizer_is_not_written(model, tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer_gguf"):
        export_gguf(model, tmp_path / "m.gguf", tokenizer_gguf=tmp_path / "missing.gguf")
    assert not (tmp_path / "m.gguf").exists()
