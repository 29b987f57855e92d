"""llama.cpp's C API through ctypes (``serving.llama_api``) on files ``gguf_export`` writes:
one-pass logits equal transformers', the weights' and the cache's bytes equal the arithmetic,
q8_0 and q4_0 weights are the model's numbers within a block's rounding, the rotation state is
read from llama.cpp's log, and bad input is refused with the known types named."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch

from helpers.heads.gates import spec_of
from helpers.heads.grouped_query import kv_group_heads, kv_group_order
from helpers.heads.pruning import prune_heads
from helpers.heads.sites import attention_sites
from helpers.serving import llama_api
from helpers.serving.gguf_export import DTYPES, export_gguf, tensor_bytes
from helpers.serving.llama_api import Cache, LlamaApiError, LlamaModel, predicted_cache_bytes
from helpers.zoo.registry import load_causal_lm
from helpers.zoo.shipped import smollm2_gguf


@pytest.fixture(scope="module")
def tiny():
    """The smoke profile's Llama with heads of 32 numbers, and a copy with 4 of its 12 KV groups
    removed unevenly over the layers (by random importance)."""
    model, tokenizer = load_causal_lm("tiny-llama-32", seed=0)
    sites = attention_sites(model)
    scores = {"self": torch.rand(len(sites), sites[0].num_heads, generator=torch.Generator().manual_seed(1))}
    chosen = [
        ("self", layer, h) for layer, g in kv_group_order(model, scores)[:4] for h in kv_group_heads(sites[layer], g)
    ]
    pruned = copy.deepcopy(model)
    prune_heads(pruned, spec_of(chosen))
    return model, pruned, tokenizer


@pytest.fixture(scope="module")
def files(tiny, tmp_path_factory):
    model, pruned, _ = tiny
    folder = tmp_path_factory.mktemp("gguf")
    out = {}
    for name, m in (("full", model), ("pruned", pruned)):
        for dtype in DTYPES:
            out[name, dtype] = export_gguf(
                m, folder / f"{name}.{dtype}.gguf", tokenizer_gguf=smollm2_gguf(), dtype=dtype, pad_uneven=True
            )
    return out


def _ids(n: int = 96) -> list[int]:
    return torch.randint(100, 40000, (n,), generator=torch.Generator().manual_seed(3)).tolist()


def test_the_structures_read_the_headers_defaults():
    lib = llama_api.library()
    llama_api.check_layout(lib)  # raises on a field out of place
    params = lib.llama_context_default_params()
    assert (params.n_ctx, params.n_batch, params.type_k, params.offload_kqv) == (512, 2048, 1, True)


@pytest.mark.parametrize("name", ["full", "pruned"])
def test_one_pass_logits_equal_transformers_in_float32(tiny, files, name):
    model = tiny[0] if name == "full" else tiny[1]
    ids = _ids()
    with torch.no_grad():
        expected = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1).numpy()
    with LlamaModel(files[name, "f32"].path) as served, served.context(128, Cache("f32", "f32")) as ctx:
        logits = ctx.logits(ids)
        tail = ctx.logits(ids, first_output=40)
    got = torch.log_softmax(torch.from_numpy(logits).double(), -1).numpy()
    assert logits.shape == (len(ids), served.n_vocab)
    assert np.abs(got - expected).max() < 1e-3
    np.testing.assert_allclose(tail, logits[40:], atol=1e-5)  # fewer outputs, the same numbers


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["full", "pruned"])
def test_the_weights_bytes_equal_the_arithmetic(files, name, dtype):
    export = files[name, dtype]
    by_hand = sum(
        int(np.prod(shape)) * {"f32": 4, "f16": 2}[kind]
        if kind in ("f32", "f16")
        else int(np.prod(shape)) // 32 * {"q8_0": 34, "q4_0": 18}[kind]
        for _, shape, kind in export.tensors
    )
    with LlamaModel(export.path) as served:
        assert served.weight_bytes == export.predicted_weight_bytes == by_hand
    assert tensor_bytes((4, 64), "q4_0") == 4 * 2 * 18


CACHES = [Cache(), Cache("f32", "f32"), Cache("q8_0", "q8_0"), Cache("q4_0", "q4_0"), Cache("q8_0", "q4_0")]


@pytest.mark.parametrize("cache", CACHES, ids=lambda c: c.label)
@pytest.mark.parametrize("cells", [256, 1024])
def test_the_cache_llama_cpp_allocates_equals_the_arithmetic(files, cache, cells):
    export = files["pruned", "f16"]
    assert len(set(export.kv_heads)) > 1  # layers of unequal widths
    keys, values = predicted_cache_bytes(export.kv_heads, 32, cells, cache)
    with LlamaModel(export.path) as served, served.context(cells, cache) as ctx:
        assert (ctx.k_type, ctx.v_type, ctx.cells) == (cache.key, cache.value, cells)
        # llama.cpp prints MiB to 0.01
        assert abs(ctx.k_mib - keys / 2**20) <= 0.005 + 1e-9 and abs(ctx.v_mib - values / 2**20) <= 0.005 + 1e-9


@pytest.mark.parametrize("dtype, step", [("q8_0", 127), ("q4_0", 8)])
def test_quantized_blocks_hold_the_models_numbers_within_a_blocks_rounding(tiny, files, dtype, step):
    import gguf

    model = tiny[0]
    reader = gguf.GGUFReader(str(files["full", dtype].path))
    tensor = next(t for t in reader.tensors if t.name == "blk.1.ffn_up.weight")
    assert tensor.tensor_type == getattr(gguf.GGMLQuantizationType, dtype.upper())
    weights = model.model.layers[1].mlp.up_proj.weight.detach().numpy()
    back = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(weights.shape)
    blocks = np.abs(weights).reshape(weights.shape[0], -1, 32).max(-1, keepdims=True)
    bound = np.repeat(blocks / step, 32, axis=-1).reshape(weights.shape)  # half a step of the block's scale, and more
    error = np.abs(back - weights)
    assert (error <= bound + 1e-6).all() and error.max() > 0  # rounded, and not stored exactly


def test_rotation_is_read_from_llama_cpps_log_and_its_switch_restored():
    os.environ.pop(llama_api.ROTATION_SWITCH, None)
    with LlamaModel(smollm2_gguf()) as served:  # heads of 64 numbers: llama.cpp rotates them
        with served.context(256, Cache("q4_0", "q4_0")) as ctx:
            assert ctx.rotated == {"k": True, "v": True}
        with served.context(256, Cache("q4_0", "q4_0", rotation=False)) as ctx:
            assert ctx.rotated == {"k": False, "v": False}
        with served.context(256, Cache()) as ctx:
            assert ctx.rotated == {"k": False, "v": False}  # a 16-bit cache is not rotated
    assert llama_api.ROTATION_SWITCH not in os.environ


def test_speed_is_timed_in_tokens_per_second(files):
    with LlamaModel(files["full", "q8_0"].path) as served, served.context(64, Cache("q8_0", "q8_0")) as ctx:
        speed = ctx.timed(_ids(24), new_tokens=4)
    assert speed["prompt tokens per second"] > 0 and speed["generated tokens per second"] > 0


def test_bad_input_is_refused_with_the_known_types_named(tiny, files, tmp_path):
    with pytest.raises(ValueError, match="unknown cache type 'q2_k'.*f32, f16, q4_0, q8_0"):
        Cache("q2_k", "f16")
    with pytest.raises(ValueError, match="unknown weight type 'q6_k'.*f32, f16, q8_0, q4_0"):
        export_gguf(tiny[0], tmp_path / "x.gguf", tokenizer_gguf=smollm2_gguf(), dtype="q6_k")
    with pytest.raises(FileNotFoundError, match="export_gguf"):
        LlamaModel(tmp_path / "missing.gguf")
    with LlamaModel(files["full", "f16"].path) as served, served.context(32) as ctx:
        with pytest.raises(ValueError, match="a pass takes 1 to 32"):
            ctx.logits(_ids(40))
    with pytest.raises(LlamaApiError, match="context manager"):
        LlamaModel(files["full", "f16"].path).context(32)


def test_llama_cpps_server_still_logs_after_the_api_captured_its_log(files):
    """llama.cpp has one logger a process: the API restores the one it found, so chapter 13's
    server (which reads the log) works after it in the same process."""
    from helpers.serving.llama_cpp import LlamaCpp, RuntimeSettings

    with LlamaModel(files["full", "f16"].path) as served, served.context(64):
        pass
    with LlamaCpp(files["full", "f32"].path, RuntimeSettings(context=256)) as run:
        assert run.cells == 256 and run.kv_mib > 0
