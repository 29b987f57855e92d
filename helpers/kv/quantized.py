"""Quantized KV caches (transformers' ``QuantizedCache``) and the bytes any cache holds.

Backends, by bits (``quantized_cache``):

* 4 and 2 bits: ``quanto`` (PyPI ``optimum-quanto``), KIVI-style: the prompt is quantized when
  it is read; later positions stay in full precision in a *residual* of at most
  ``residual_length`` positions, and when it fills, everything (the de-quantized history, the
  residual and the new position) is quantized again. Groups of ``q_group_size`` numbers along
  the head dimension (one group per position and head when it equals the head size), each
  with a scale and a zero point in the model's dtype; codes packed 2 (4-bit) or 4 (2-bit) a byte.
* 8 bits: ``fp8`` (float8 e4m3, built into transformers): one scale per layer for keys and one
  for values, fixed when the prompt is read; every position is stored in 8 bits, no residual.

A teacher-forced pass feeds the same cache object in chunks (``cached_chunks``): chunks of
``residual_length`` positions reproduce, position for position, what one-at-a-time generation
gives (each chunk sees the history quantized and itself in full precision, then joins the
quantized history), which tests/test_kv_policies.py checks token for token.

``stored_bytes(cache)`` counts what a cache object holds: keys and values, codes, scales, zero
points, residuals, and the heavy hitters' scores (kv.selective), whatever the cache type.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers.cache_utils import BaseQuantizedLayer, Cache, DynamicCache, DynamicLayer

from ..base.devices import to_device

_QUANTO_BITS = (2, 4)
FP8_BITS = 8
_BACKEND_PIN = "optimum-quanto==0.2.7"


def quantized_cache(model: nn.Module, bits: int, residual_length: int = 32, q_group_size: int | None = None) -> Cache:
    """A ``QuantizedCache`` for ``model`` at ``bits`` (2 or 4: quanto, grouped per ``q_group_size``
    numbers, default the head size; 8: fp8, per tensor). Layers a pruning left without heads
    (one phantom entry of width 1, ``pruning.PHANTOM_WIDTH``) get a plain layer: nothing to quantize."""
    from transformers import QuantizedCache

    from .cache import layer_entries

    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if bits == FP8_BITS:
        cache = QuantizedCache("fp8", config)
    elif bits in _QUANTO_BITS:
        _require_quanto()
        cache = QuantizedCache(
            "quanto",
            config,
            nbits=bits,
            q_group_size=q_group_size or head_dim,
            residual_length=residual_length,
            axis_key=0,
            axis_value=0,
        )
    else:
        raise ValueError(f"a quantized KV cache here has 2 or 4 bits (quanto) or 8 (fp8); got {bits}")
    for i, (_heads, width) in enumerate(layer_entries(model)):
        if width != head_dim:  # a phantom layer (no head left)
            cache.layers[i] = DynamicLayer()
    return cache


def _require_quanto() -> None:
    import importlib.util

    if importlib.util.find_spec("optimum.quanto") is None:
        raise ImportError(
            f"the 2- and 4-bit KV caches use the quanto backend: `pip install {_BACKEND_PIN}` "
            "(`make setup` installs it)"
        )


def build_backend() -> str:
    """Compile quanto's CPU extension (``quanto_cpp``: it unpacks 2- and 4-bit codes) now, and
    return where it lives. quanto compiles it on first use into its own package folder, which is
    inside ``.venv`` here; ``make setup`` calls this so that no chapter pays the compile (about
    a minute on 2 cores) or writes into the environment while it runs. Needs a C++ compiler."""
    _require_quanto()
    from optimum.quanto.library.extensions import get_extension

    extension = get_extension("quanto_cpp")
    try:
        extension.lib  # noqa: B018 (loading the library is the check)
    except Exception as error:  # torch's loader raises several types; the fix is the same
        raise RuntimeError(
            "could not compile quanto's CPU extension, which chapter 14's 2- and 4-bit "
            "caches need: install a C++ compiler (Debian: `apt-get install g++`) and run "
            f"`make setup` again ({type(error).__name__}: {error})"
        ) from error
    return extension.build_directory


def prefilled(cache: Cache, prompt: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> Cache:
    """``cache`` holding ``prompt`` (per layer: keys, values ``[batch, kv_heads, positions,
    head_dim]``, as a ``DynamicCache`` left them), exactly as if the model had read the prompt
    with it: every cache here stores a prompt's states as ``update`` receives them."""
    for i, (keys, values) in enumerate(prompt):
        cache.update(keys, values, i)
    return cache


def prompt_states(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, the keys and values a ``DynamicCache`` holds (for ``prefilled``)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def cached_chunks(model: nn.Module, input_ids: torch.Tensor, cache: Cache, chunk: int) -> torch.Tensor:
    """Feed ``input_ids`` ``[batch, T]`` to ``model`` (its base model) through ``cache`` in chunks
    of ``chunk`` positions (1: one position at a time, as generation does); returns the last
    hidden states ``[batch, T, hidden]``, on the model's device (``input_ids`` is moved there)."""
    input_ids = to_device(input_ids, model)
    out = []
    with torch.no_grad():
        for start in range(0, input_ids.shape[1], chunk):
            ids = input_ids[:, start : start + chunk]
            out.append(model.base_model(input_ids=ids, past_key_values=cache, use_cache=True)[0])
    return torch.cat(out, 1)


# ---- bytes ----------------------------------------------------------------------------------------
def tensor_bytes(t) -> int:
    """Bytes of a tensor's storage, through quanto's wrapper tensors (codes, scales, zero points)
    and tuples of tensors; 0 for None."""
    if t is None:
        return 0
    if isinstance(t, (tuple, list)):
        return sum(tensor_bytes(x) for x in t)
    if type(t) is torch.Tensor or isinstance(t, nn.Parameter):
        return t.numel() * t.element_size()
    if hasattr(t, "__tensor_flatten__"):
        names, _ = t.__tensor_flatten__()
        return sum(tensor_bytes(getattr(t, name)) for name in names)
    raise TypeError(f"cannot count the bytes of a {type(t).__name__}")


def _layer_bytes(layer) -> int:
    """Bytes one cache layer holds: a selective layer's kept entries (and scores), a quantized
    layer's codes, scales and zero points and its full-precision residual, a plain layer's keys
    and values."""
    if hasattr(layer, "nbytes") and callable(layer.nbytes):
        return layer.nbytes()
    total = tensor_bytes(layer.keys) + tensor_bytes(layer.values)
    if isinstance(layer, BaseQuantizedLayer):
        total += tensor_bytes(layer._quantized_keys) + tensor_bytes(layer._quantized_values)
    return total


def stored_bytes(cache: Cache) -> int:
    """Bytes every layer of ``cache`` holds (``_layer_bytes``)."""
    return sum(_layer_bytes(layer) for layer in cache.layers)
