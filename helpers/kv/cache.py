"""The key/value cache of a decoder-only LM: predicted from the model's (pruned) layers, measured
from the cache tensors a forward pass or ``generate`` leaves.

Under grouped-query attention a layer caches one key and one value vector per *kept KV group*
(``AttentionSite.kv_groups``), whatever number of query heads reads it: pruning query heads
saves no cache until a group loses its last head. A layer with no head left caches one phantom
entry of width 1 (``sites.PHANTOM_WIDTH``), which keeps positions right. A sliding-window layer
(Mistral, Gemma 3's local layers) keeps at most ``sliding_window - 1`` past positions.

    per_token = kv_bytes_per_token(model)                      # bytes per position, whole batch of 1
    out = model(input_ids, use_cache=True)
    assert cache_bytes(out.past_key_values) == kv_bytes(model, tokens=input_ids.shape[1], batch=len(input_ids))

``published_kv_table`` does the same arithmetic on published configurations (no weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..base import ledger
from ..base.devices import to_device
from ..heads.sites import PHANTOM_WIDTH, attention_sites


def _element_bytes(model: nn.Module, dtype: torch.dtype | None) -> int:
    dtype = dtype or next(model.parameters()).dtype
    return torch.empty((), dtype=dtype).element_size()


def _layer_windows(config) -> list[int | None]:
    """Per decoder layer, the sliding window (positions) or None for full attention: from
    ``config.layer_types`` where the family has it (Gemma 3, Qwen3), else every layer slides when
    ``config.sliding_window`` is set (Mistral)."""
    config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if types is not None:
        return [window if t == "sliding_attention" and window else None for t in types]
    return [window] * config.num_hidden_layers


def layer_entries(model: nn.Module) -> list[tuple[int, int]]:
    """Per decoder layer, ``(cached heads, head width)``: the kept KV groups and the head
    dimension, or the phantom entry ``(1, PHANTOM_WIDTH)`` of a layer with no head left."""
    out = []
    for site in attention_sites(model):
        if site.kind not in ("self", "dec_self"):
            continue
        out.append((len(site.kv_groups), site.head_dim) if site.heads else (1, PHANTOM_WIDTH))
    return out


def kv_bytes(model: nn.Module, tokens: int, batch: int = 1, dtype: torch.dtype | None = None) -> int:
    """Bytes the cache holds after ``tokens`` positions of ``batch`` sequences: keys and values
    of every layer's cached heads (``layer_entries``), a sliding layer capped at its window - 1,
    in ``dtype`` (default: the model's)."""
    size = _element_bytes(model, dtype)
    windows = _layer_windows(model.config)
    total = 0
    for (heads, width), window in zip(layer_entries(model), windows, strict=True):
        kept = tokens if window is None else min(tokens, window - 1)
        total += 2 * heads * width * kept * batch * size
    return total


def kv_bytes_per_token(model: nn.Module, dtype: torch.dtype | None = None) -> int:
    """Bytes one position of one sequence adds to a full-attention cache (sliding layers counted
    as full: the cost before the window fills)."""
    size = _element_bytes(model, dtype)
    return sum(2 * heads * width * size for heads, width in layer_entries(model))


def cache_bytes(cache) -> int:
    """Bytes of the key and value tensors a transformers cache holds (every layer)."""
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise TypeError(f"expected a transformers Cache with .layers, got {type(cache).__name__}")
    return sum(t.numel() * t.element_size() for layer in layers for t in (layer.keys, layer.values) if t is not None)


# ---- published configurations ------------------------------------------------------------------
@dataclass(frozen=True)
class PublishedModel:
    """What the KV arithmetic needs from a model's published config.json: ``layers`` decoder
    layers, ``kv_heads`` key/value heads per layer, ``head_dim``; ``parameters`` (billions) from
    its model card; ``sliding`` layers of ``window`` positions (None: all layers attend fully)."""

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    parameters: float
    sliding: int = 0
    window: int | None = None

    def bytes_per_token(self, element_bytes: int = 2, kv_heads: int | None = None) -> int:
        """Keys and values of every layer for one position (a full-attention cache)."""
        return 2 * self.layers * (self.kv_heads if kv_heads is None else kv_heads) * self.head_dim * element_bytes

    def cache_bytes(self, tokens: int, element_bytes: int = 2, kv_heads: int | None = None) -> int:
        """The cache after ``tokens`` positions, sliding layers capped at their window."""
        per_layer = 2 * (self.kv_heads if kv_heads is None else kv_heads) * self.head_dim * element_bytes
        full = self.layers - self.sliding
        return per_layer * (full * tokens + self.sliding * min(tokens, self.window or tokens))

    def crossover(self, element_bytes: int = 2, kv_heads: int | None = None) -> float:
        """Context length (positions, batch 1) at which the cache outweighs the weights (both in
        ``element_bytes`` per number); inf when the sliding layers alone never get there."""
        weights = self.parameters * 1e9 * element_bytes
        per_layer = 2 * (self.kv_heads if kv_heads is None else kv_heads) * self.head_dim * element_bytes
        every_layer = weights / (self.layers * per_layer)  # before any window fills
        if not self.sliding or self.window is None or every_layer <= self.window:
            return every_layer
        full = self.layers - self.sliding
        if full == 0:
            return float("inf")
        return (weights - self.sliding * self.window * per_layer) / (full * per_layer)


def published_kv_table(models: Sequence[PublishedModel], element_bytes: int = 2, removed_share: float = 1 / 3):
    """One row per model: KV bytes per token (bf16 by default), the context at which the cache
    outweighs the weights, and the same with ``removed_share`` of the KV heads of every layer
    removed (rounded to whole heads)."""
    import pandas as pd

    rows = []
    for m in models:
        kept = m.kv_heads - round(m.kv_heads * removed_share)
        rows.append(
            {
                "model": m.name,
                "layers": m.layers,
                "KV heads": m.kv_heads,
                "head dim": m.head_dim,
                "parameters (B)": m.parameters,
                "KiB per token": m.bytes_per_token(element_bytes) / 1024,
                "cache = weights at (tokens)": m.crossover(element_bytes),
                "KV heads kept": kept,
                "KiB per token, pruned": m.bytes_per_token(element_bytes, kept) / 1024,
                "cache = weights at, pruned": m.crossover(element_bytes, kept),
            }
        )
    return pd.DataFrame(rows)


# ---- cached generation -------------------------------------------------------------------------
def generate_cached(model: nn.Module, input_ids: torch.Tensor, new_tokens: int):
    """Greedy generation of exactly ``new_tokens`` tokens with the KV cache, from unpadded
    ``input_ids`` ``[B, T]``: ``(sequences [B, T + new_tokens], the cache it left)``. The cache
    then holds ``T + new_tokens - 1`` positions (the last token is never fed back). Both on the
    model's device (``input_ids`` is moved there)."""
    input_ids = to_device(input_ids, model)
    pad = getattr(model.generation_config, "pad_token_id", None)
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            do_sample=False,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            use_cache=True,
            return_dict_in_generate=True,
            pad_token_id=0 if pad is None else pad,
        )
    return out.sequences, out.past_key_values


def generation_seconds(
    model: nn.Module, input_ids: torch.Tensor, *, new_tokens: int, repeats: int = 3, warmup: int = 1
) -> list[float]:
    """Wall-clock seconds of ``generate_cached`` per repeat, after ``warmup`` untimed calls (the
    prompt moved to the model's device first, outside the timed region)."""
    import time

    input_ids = to_device(input_ids, model)

    with ledger.entry(
        "timing runs", f"cached generation, batch {len(input_ids)}", model=model, examples=len(input_ids)
    ):
        for _ in range(warmup):
            generate_cached(model, input_ids, new_tokens)
        times = []
        for _ in range(repeats):
            if input_ids.device.type == "cuda":
                torch.cuda.synchronize(input_ids.device)
            start = time.perf_counter()
            generate_cached(model, input_ids, new_tokens)
            if input_ids.device.type == "cuda":
                torch.cuda.synchronize(input_ids.device)
            times.append(time.perf_counter() - start)
    return times
