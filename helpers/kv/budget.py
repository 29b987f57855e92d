"""One KV-cache configuration, three ways: as arithmetic (the bytes it holds), as a real cache
(``real_run``: the cache object a cached generation reads and writes, one position at a time),
and as a fast teacher-forced pass (``fast_run``) that gives the same log-probabilities.

A configuration (``CacheSpec``) is applied to a model, pruned or not, after a *prompt* the
model reads in full: the plain cache keeps everything; ``window`` keeps full context in the KV
heads ``full[layer][kv head]`` and sinks + a window in the others; ``evict`` keeps heavy hitters
and recent positions (kv.selective); ``quanto`` and ``fp8`` quantize (kv.quantized).

    spec = CacheSpec("window", sinks=4, window=28, full=((True, False, False),) * 30)
    hidden, peak = real_run(model, ids, prompt=127, spec=spec)     # [B, T - prompt, hidden], bytes
    hidden = fast_run(model, ids, prompt_cache, spec)             # the same states, one pass
    predicted_peak_bytes(model, spec, prompt=127, total=288, batch=2) == peak

Bytes are what the cache object stores *between* positions, at its largest while it reads the
sequence (a quantized cache's residual grows and empties; the others only grow).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import DynamicCache

from ..base.devices import to_device
from .cache import layer_entries
from .quantized import FP8_BITS, cached_chunks, prefilled, prompt_states, quantized_cache, stored_bytes
from .selective import (
    HeavyHitters,
    KeepAll,
    SelectiveCache,
    SinkWindow,
    masked_heads,
    selective_attention,
    window_visibility,
)

KINDS = ("plain", "window", "evict", "quanto", "fp8")
SCORE_BYTES = 4  # a heavy hitter's accumulated attention (float32)


@dataclass(frozen=True)
class CacheSpec:
    kind: str = "plain"
    bits: int = 16
    residual: int = 32  # quanto: full-precision positions before re-quantizing
    sinks: int = 4
    window: int = 28
    full: tuple[tuple[bool, ...], ...] = ()  # window: per layer, per KV head, keeps full context
    budget: int = 0  # evict: positions kept per KV head
    recent: int = 0  # evict: of which the most recent

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown cache kind {self.kind!r}: one of {KINDS}")


def head_dim_of(model: nn.Module) -> int:
    config = model.config
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


# ---- arithmetic -----------------------------------------------------------------------------------
def _quanto_bytes(groups: int, bits: int, group_size: int, element: int) -> int:
    """``groups`` groups of ``group_size`` numbers: codes packed ``8 // bits`` rows a byte row,
    a scale and a zero point each."""
    return math.ceil(groups / (8 // bits)) * group_size + 2 * groups * element


def entries_after(model: nn.Module, removed: Sequence[tuple[str, int, int]] = ()) -> list[tuple[int, int]]:
    """``kv.cache.layer_entries`` of ``model`` with query heads ``removed`` (``(kind, layer, head)``),
    without pruning a copy: per layer, the KV groups that keep a query head and the head size, or
    the phantom entry ``(1, PHANTOM_WIDTH)`` of a layer left with none."""
    from ..heads.sites import PHANTOM_WIDTH, attention_sites

    gone = {(layer, head) for _, layer, head in removed}
    out = []
    for site in (s for s in attention_sites(model) if s.kind in ("self", "dec_self")):
        kept = [h for h in site.heads if (site.layer, h) not in gone]
        out.append((len({site.kv_group(h) for h in kept}), site.head_dim) if kept else (1, PHANTOM_WIDTH))
    return out


def bytes_after(
    model: nn.Module,
    spec: CacheSpec,
    *,
    positions: int,
    prompt: int,
    batch: int,
    element: int = 2,
    entries: Sequence[tuple[int, int]] | None = None,
) -> int:
    """Bytes ``spec``'s cache holds after reading ``positions`` positions (the first ``prompt`` in
    one pass, then one at a time) of ``batch`` sequences, keys and values in ``element`` bytes;
    ``entries`` (``entries_after``) stands for the model's own layers when given."""
    dim = head_dim_of(model)
    total = 0
    for layer, (heads, width) in enumerate(layer_entries(model) if entries is None else entries):
        phantom = width != dim
        if spec.kind == "plain" or phantom:
            total += 2 * heads * width * element * positions * batch
        elif spec.kind == "window":
            kept = [positions if f else min(positions, spec.sinks + spec.window) for f in spec.full[layer]]
            total += sum(2 * dim * element * k * batch for k in kept)
        elif spec.kind == "evict":
            kept = min(positions, spec.budget)
            total += heads * batch * kept * (2 * dim * element + SCORE_BYTES)
        elif spec.kind == "fp8":
            total += 2 * heads * dim * positions * batch + 2 * 4  # one float32 scale for keys, one for values
        else:
            quantized, residual = _quanto_split(positions, prompt, spec.residual)
            total += 2 * (
                _quanto_bytes(batch * heads * quantized, spec.bits, dim, element)
                + batch * heads * residual * dim * element
            )
    return total


def _quanto_split(positions: int, prompt: int, residual: int) -> tuple[int, int]:
    """(quantized, full-precision residual) positions of a quanto cache after ``positions``: the
    prompt is quantized at once; the residual empties into the quantized part when it reaches
    ``residual`` (``QuantizedLayer.update``)."""
    extra = positions - prompt
    flushed = (extra // residual) * residual
    return prompt + flushed, extra - flushed


def predicted_peak_bytes(
    model: nn.Module,
    spec: CacheSpec,
    *,
    prompt: int,
    total: int,
    batch: int,
    element: int = 2,
    entries: Sequence[tuple[int, int]] | None = None,
) -> int:
    """The most ``spec``'s cache holds while reading ``total`` positions after a ``prompt``."""
    entries = layer_entries(model) if entries is None else entries
    return max(
        bytes_after(model, spec, positions=p, prompt=prompt, batch=batch, element=element, entries=entries)
        for p in range(prompt, total + 1)
    )


# ---- real caches ------------------------------------------------------------------------------------
def _policies(model: nn.Module, spec: CacheSpec):
    heads = [h for h, _ in layer_entries(model)]
    if spec.kind == "window":
        return [
            [KeepAll() if f else SinkWindow(spec.sinks, spec.window) for f in spec.full[layer]]
            for layer in range(len(heads))
        ]
    return [[HeavyHitters(spec.budget, spec.recent)] * h for h in heads]


def _make_cache(model: nn.Module, spec: CacheSpec):
    """An empty cache object for ``spec``."""
    if spec.kind == "plain":
        return DynamicCache()
    if spec.kind in ("window", "evict"):
        return SelectiveCache(_policies(model, spec))
    return quantized_cache(model, FP8_BITS if spec.kind == "fp8" else spec.bits, residual_length=spec.residual)


def _context(model: nn.Module, spec: CacheSpec, cache):
    import contextlib

    return selective_attention(model, cache) if spec.kind in ("window", "evict") else contextlib.nullcontext()


@torch.no_grad()
def real_run(model: nn.Module, input_ids: torch.Tensor, prompt: int, spec: CacheSpec) -> tuple[torch.Tensor, int]:
    """The cached generation, teacher-forced: read ``input_ids[:, :prompt]`` in one pass, then the
    rest one position at a time through ``spec``'s real cache. Returns the last hidden states of
    the positions after the prompt ``[batch, T - prompt, hidden]`` and the most bytes the cache
    held between positions (``stored_bytes``). ``input_ids`` is moved to the model's device."""
    input_ids = to_device(input_ids, model)
    cache = _make_cache(model, spec)
    out, peak = [], 0
    with _context(model, spec, cache):
        model.base_model(input_ids=input_ids[:, :prompt], past_key_values=cache, use_cache=True)
        peak = stored_bytes(cache)
        for t in range(prompt, input_ids.shape[1]):
            out.append(model.base_model(input_ids=input_ids[:, t : t + 1], past_key_values=cache, use_cache=True)[0])
            peak = max(peak, stored_bytes(cache))
    return torch.cat(out, 1), peak


@torch.no_grad()
def prompt_pass(model: nn.Module, input_ids: torch.Tensor, prompt: int) -> DynamicCache:
    """The plain cache after reading ``input_ids[:, :prompt]``: shared by every configuration of one model."""
    return model.base_model(input_ids=to_device(input_ids[:, :prompt], model), use_cache=True).past_key_values


def _copy(cache: DynamicCache) -> DynamicCache:
    """A new plain cache over the same prompt tensors (``update`` concatenates into new tensors,
    so the prompt's stay untouched)."""
    fresh = DynamicCache()
    return prefilled(fresh, prompt_states(cache))


@torch.no_grad()
def fast_run(model: nn.Module, input_ids: torch.Tensor, prompt_cache: DynamicCache, spec: CacheSpec) -> torch.Tensor:
    """``real_run``'s hidden states in few passes, from the plain ``prompt_cache`` of
    ``input_ids[:, :prompt]``: plain, one pass; windowed heads, one pass whose per-head mask lets
    each query head see what the windowed cache would keep (``window_visibility``); quanto, the
    real cache fed ``spec.residual`` positions a pass (the chunks one-at-a-time generation
    quantizes together); fp8, the real cache in one pass. Heavy hitters depend on every step's
    attention: ``real_run`` it is."""
    prompt = prompt_cache.get_seq_length()
    rest = to_device(input_ids[:, prompt:], model)
    if spec.kind == "plain":
        return model.base_model(input_ids=rest, past_key_values=_copy(prompt_cache), use_cache=True)[0]
    if spec.kind == "window":
        group = model.config.num_attention_heads // model.config.num_key_value_heads
        visible = {
            layer: window_visibility(
                full, group, sinks=spec.sinks, window=spec.window, start=prompt, queries=rest.shape[1]
            )
            for layer, full in enumerate(spec.full)
        }
        with masked_heads(model, visible):
            return model.base_model(input_ids=rest, past_key_values=_copy(prompt_cache), use_cache=True)[0]
    if spec.kind == "evict":
        return real_run(model, input_ids, prompt, spec)[0]
    cache = prefilled(_make_cache(model, spec), prompt_states(prompt_cache))
    return cached_chunks(model, rest, cache, spec.residual if spec.kind == "quanto" else rest.shape[1])


def pruned_copy(model: nn.Module, heads: Sequence[tuple[str, int, int]]) -> nn.Module:
    """A copy of ``model`` with query ``heads`` (``(kind, layer, head)``) physically removed."""
    from ..heads.gates import spec_of
    from ..heads.pruning import prune_heads

    pruned = copy.deepcopy(model)
    if heads:
        prune_heads(pruned, spec_of(list(heads)))
    return pruned
