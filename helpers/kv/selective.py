"""KV caches that keep, per key/value head, only some past positions: *windowed heads* (a few
first "sink" positions and a window of recent ones, StreamingLLM / DuoAttention's streaming
heads) and *heavy hitters* (H2O: the positions that received the most attention, plus the most
recent ones). Both are real transformers caches: a cached decoder-only model (Llama family)
reads and writes them token by token, and what they store is all they hold.

    policy = {layer: [SinkWindow(4, 28), KeepAll(), SinkWindow(4, 28)] ...}   # per KV head
    cache = SelectiveCache(policies)                        # one SelectiveLayer per layer
    with selective_attention(model, cache):
        out = model(input_ids=prompt, past_key_values=cache, use_cache=True)     # read fully, then compressed
        out = model(input_ids=next_token, past_key_values=cache, use_cache=True)  # one position at a time

Protocol: the prompt is read with full causal attention, then each head's cache is compressed
to what its policy keeps; after that every new position attends to what is kept plus itself,
and the cache is trimmed again. A windowed head at position ``t`` therefore sees the sinks and
positions ``t - window .. t``; it stores ``sinks + window`` entries between steps.

Keys are cached after the rotary embedding, so dropping an entry leaves every other position's
encoding as it was: no re-numbering is needed.

The teacher-forced twin of windowed heads is ``window_visibility`` with ``masked_attention``:
one pass over a continuation, each query head seeing exactly what the windowed cache would give
it (tests/test_kv_policies.py holds the two equal).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn
from transformers.cache_utils import Cache, DynamicLayer

from ..heads.sites import RoutedConfig, UnsupportedModelError, attention_sites

_SELECTIVE = "sixteen_heads_selective"
_MASKED = "sixteen_heads_masked"
_LAYER_ATTR = "_sixteen_heads_kv_layer"
_VISIBLE_ATTR = "_sixteen_heads_visible"
_SCORE_DTYPE = torch.float32  # heavy hitters' accumulated attention, one number per kept entry


# ---- what each KV head keeps ------------------------------------------------------------------
@dataclass(frozen=True)
class KeepAll:
    """Full context: every position stays."""

    def kept(self, entries: int) -> int:
        return entries


@dataclass(frozen=True)
class SinkWindow:
    """The first ``sinks`` positions and the ``window`` most recent ones."""

    sinks: int
    window: int

    def kept(self, entries: int) -> int:
        return min(entries, self.sinks + self.window)


@dataclass(frozen=True)
class HeavyHitters:
    """At most ``budget`` positions: the ``recent`` most recent, and of the others those with the
    largest attention received so far (summed over the query heads that read this KV head and
    over every query since the position entered; H2O, Zhang et al. 2023)."""

    budget: int
    recent: int

    def __post_init__(self):
        if not 0 <= self.recent <= self.budget or self.budget < 1:
            raise ValueError(
                f"heavy hitters need 0 <= recent <= budget and budget >= 1; got budget={self.budget}, "
                f"recent={self.recent}"
            )

    def kept(self, entries: int) -> int:
        return min(entries, self.budget)


_Policy = KeepAll | SinkWindow | HeavyHitters


@dataclass
class HeadGroup:
    """KV heads ``heads`` (indices in the layer) that share one policy: their keys and values
    ``[batch, len(heads), entries, head_dim]``, in the order the positions arrived, and for heavy
    hitters the attention each entry has received ``[batch, len(heads), entries]``."""

    heads: list[int]
    policy: _Policy
    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None
    scores: torch.Tensor | None = None

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        k, v = keys[:, self.heads], values[:, self.heads]
        self.keys = k if self.keys is None else torch.cat([self.keys, k], 2)
        self.values = v if self.values is None else torch.cat([self.values, v], 2)
        if isinstance(self.policy, HeavyHitters):
            fresh = torch.zeros(k.shape[:3], dtype=_SCORE_DTYPE, device=k.device)
            self.scores = fresh if self.scores is None else torch.cat([self.scores, fresh], 2)

    def observe(self, probs: torch.Tensor, group_size: int) -> None:
        """Add attention ``probs`` ``[batch, len(heads) * group_size, queries, entries]`` to the scores."""
        if self.scores is not None:
            b, _, q, n = probs.shape
            self.scores += probs.float().view(b, len(self.heads), group_size, q, n).sum((2, 3))

    def trim(self) -> None:
        """Keep what the policy keeps (in arrival order)."""
        n = self.keys.shape[2]
        keep = self.policy.kept(n)
        if keep == n:
            return
        if isinstance(self.policy, SinkWindow):
            kept = [torch.arange(self.policy.sinks), torch.arange(n - self.policy.window, n)]
            index = torch.cat(kept).to(self.keys.device)
            self.keys, self.values = self.keys[:, :, index], self.values[:, :, index]
            return
        recent, older = self.policy.recent, n - self.policy.recent
        heavy = torch.topk(self.scores[..., :older], keep - recent, dim=-1).indices.sort(-1).values
        fresh = torch.arange(older, n, device=heavy.device).expand(*heavy.shape[:2], recent)
        index = torch.cat([heavy, fresh], -1)  # [batch, heads, keep]
        self.keys, self.values = _rows(self.keys, index), _rows(self.values, index)
        self.scores = self.scores.gather(2, index)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values, self.scores) if t is not None)


def _rows(states: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``states[b, h, index[b, h]]``: ``states`` ``[batch, heads, entries, dim]``, ``index``
    ``[batch, heads, keep]`` -> ``[batch, heads, keep, dim]``. The same values as ``gather`` along
    entries, but copied a row of ``dim`` at a time (``index_select``): in 16 bits on a CPU that is
    about 15 times faster, and heavy hitters trim every layer at every position."""
    b, h, n, d = states.shape
    flat = (index + torch.arange(b * h, device=index.device).view(b, h, 1) * n).reshape(-1)
    return states.reshape(b * h * n, d).index_select(0, flat).view(b, h, index.shape[-1], d)


class _SelectiveLayer(DynamicLayer):
    """One decoder layer's cache: its KV heads in ``HeadGroup``s by policy. ``update`` only
    stores; ``selective_attention``'s attention function reads the groups, then ``trim``s them."""

    def __init__(self, policies: Sequence[_Policy]):
        super().__init__()
        by_policy: dict[_Policy, list[int]] = {}
        for head, policy in enumerate(policies):
            by_policy.setdefault(policy, []).append(head)
        self.groups = [HeadGroup(heads, policy) for policy, heads in by_policy.items()]
        self.heads = len(policies)
        self.seen = 0  # positions read so far (the next position's index)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if key_states.shape[1] != self.heads:
            raise ValueError(
                f"this layer's policies cover {self.heads} KV heads, the model gave {key_states.shape[1]}: "
                "give one policy per KV head the (pruned) layer keeps"
            )
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        for group in self.groups:
            group.append(key_states, value_states)
        self.seen += key_states.shape[2]
        return key_states, value_states  # not read: the attention function reads the groups

    def get_seq_length(self) -> int:
        return self.seen

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.seen + query_length, 0

    def nbytes(self) -> int:
        return sum(g.nbytes() for g in self.groups)


class SelectiveCache(Cache):
    """A cache of ``_SelectiveLayer``s: ``policies[layer]`` lists one policy per KV head."""

    def __init__(self, policies: Sequence[Sequence[_Policy]]):
        super().__init__(layers=[_SelectiveLayer(p) for p in policies])


# ---- attention over what each head keeps ------------------------------------------------------
def _attend(
    query: torch.Tensor, keys: torch.Tensor, *, values: torch.Tensor, scaling: float, visible: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention of ``query`` ``[b, h_kv * g, q, d]`` over ``keys``/``values`` ``[b, h_kv, n, d]``
    (query heads ``i * g .. i * g + g - 1`` read KV head ``i``, without copying the keys ``g``
    times); ``visible`` ``[q, n]`` or ``[h_kv * g, q, n]`` (True: may attend) or None for all.
    Returns the output ``[b, h_kv * g, q, d]`` and the probabilities ``[b, h_kv * g, q, n]``
    (softmax in float32)."""
    b, heads, q, d = query.shape
    kv, n = keys.shape[1], keys.shape[2]
    g = heads // kv
    grouped = query.reshape(b, kv, g * q, d)  # a KV head's query heads, stacked
    scores = torch.matmul(grouped, keys.transpose(-1, -2)).float() * scaling  # [b, kv, g * q, n]
    if visible is not None:
        scores = scores.masked_fill(
            ~visible.reshape(-1, g * q, n) if visible.dim() == 3 else ~visible.repeat(g, 1), float("-inf")
        )
    probs = torch.softmax(scores, -1)
    out = torch.matmul(probs.to(values.dtype), values)  # [b, kv, g * q, d]
    return out.reshape(b, heads, q, d), probs.reshape(b, heads, q, n)


def _selective_attention(
    module: nn.Module, query, key, value, attention_mask, scaling: float, dropout: float = 0.0, **kwargs
):
    """query ``[batch, n_query, q_len, head_dim]``. Reading a prompt (the layer's first call) is
    causal over it; afterwards each new position sees every entry its head kept and itself."""
    layer: _SelectiveLayer = getattr(module, _LAYER_ATTR)
    g, q_len = module.num_key_value_groups, query.shape[2]
    prompt = layer.seen == q_len
    out = torch.empty_like(query)
    for group in layer.groups:
        rows = [h * g + i for h in group.heads for i in range(g)]
        keys, values = group.keys, group.values
        n = keys.shape[2]
        visible = None
        if q_len > 1:
            if not prompt:
                raise ValueError("a selective cache reads one position at a time after its prompt")
            visible = torch.ones(q_len, n, dtype=torch.bool, device=query.device).tril()
        out[:, rows], probs = _attend(query[:, rows], keys, values=values, scaling=scaling, visible=visible)
        group.observe(probs, g)
        group.trim()
    return out.transpose(1, 2).contiguous(), None


def _masked_attention(
    module: nn.Module, query, key, value, attention_mask, scaling: float, dropout: float = 0.0, **kwargs
):
    """Attention with a per-query-head visibility ``[n_query, q_len, kv_len]`` set on the module
    (``masked_heads``); the model's own mask is ignored (unpadded sequences only)."""
    visible = getattr(module, _VISIBLE_ATTR)
    out, _ = _attend(query, key, values=value, scaling=scaling, visible=visible.to(query.device))
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    for name, function in ((_SELECTIVE, _selective_attention), (_MASKED, _masked_attention)):
        if name not in ALL_ATTENTION_FUNCTIONS:
            AttentionInterface.register(name, function)


def _self_sites(model: nn.Module):
    sites = [s for s in attention_sites(model) if s.kind == "self"]
    if not sites or sites[0].family != "llama":
        raise UnsupportedModelError(
            "selective KV caches and per-head masks are written for the Llama family "
            "(Llama, Mistral, Qwen2/3): a decoder-only model whose attention takes key/value "
            f"states from its cache; got {type(model).__name__}"
        )
    for site in sites:
        if isinstance(site.module.config, RoutedConfig):
            raise UnsupportedModelError(
                f"layer {site.layer} spreads its query heads unevenly over its KV heads "
                "(pruned): selective caches need every kept KV head to keep its group whole"
            )
    return sites


@contextmanager
def _routed(model: nn.Module, name: str, attributes: Mapping[int, object], attr: str) -> Iterator[nn.Module]:
    """Route every self-attention layer to attention function ``name``, with ``attributes[layer]``
    set on its module as ``attr``; restored on exit."""
    _register()
    sites = _self_sites(model)
    try:
        for site in sites:
            site.module.config = RoutedConfig(site.module.config, name)
            setattr(site.module, attr, attributes[site.layer])
        yield model
    finally:
        for site in sites:
            if isinstance(site.module.config, RoutedConfig):
                site.module.config = site.module.config._base
            if hasattr(site.module, attr):
                delattr(site.module, attr)


def selective_attention(model: nn.Module, cache: SelectiveCache):
    """Context: ``model``'s self-attention reads and trims ``cache`` (its layer ``i`` for decoder
    layer ``i``)."""
    return _routed(model, _SELECTIVE, dict(enumerate(cache.layers)), _LAYER_ATTR)


def masked_heads(model: nn.Module, visible: Mapping[int, torch.Tensor]):
    """Context: decoder layer ``i`` attends with visibility ``visible[i]`` ``[n_query, q_len, kv_len]``."""
    return _routed(model, _MASKED, visible, _VISIBLE_ATTR)


def window_visibility(
    full: Sequence[bool], group_size: int, *, sinks: int, window: int, start: int, queries: int
) -> torch.Tensor:
    """``[n_kv * group_size, queries, start + queries]``: which positions query heads see when
    KV head ``i`` keeps full context (``full[i]``) or sinks + window, for queries at positions
    ``start .. start + queries - 1`` over keys ``0 .. start + queries - 1`` (causal), as
    ``SelectiveCache`` with ``SinkWindow(sinks, window)`` gives them after a prompt of ``start``
    positions read fully."""
    t = torch.arange(start, start + queries).unsqueeze(1)
    j = torch.arange(start + queries).unsqueeze(0)
    causal = j <= t
    windowed = causal & ((j < sinks) | (t - j <= window))
    per_kv = torch.stack([causal if f else windowed for f in full])
    return per_kv.repeat_interleave(group_size, 0)
