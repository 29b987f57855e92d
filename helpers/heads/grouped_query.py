"""Grouped-query attention (GQA): heads are query heads; key/value heads are shared by groups.

In Llama, Qwen2/3, Mistral and Gemma 3 a layer has ``H`` query heads and ``H / G`` key/value
heads; query head ``h`` reads key/value head ``h // G`` (transformers' ``repeat_kv``). This
library's unit is the query head, as in the paper: gates, importance and pruning act on the
query heads' context vectors (the input of W_o). On top of that:

* ``kv_group_importance``: the importance of a KV group, the sum of its query heads' scores;
* ``kv_group_heads`` / ``prune_kv_groups``: remove whole KV groups;
* physical pruning keeps a KV head while any of its query heads remains and drops its key and
  value rows (and its KV-cache share) once none does.

After pruning, the kept query heads of a layer may be spread unevenly over the kept KV groups
(two heads of group 0, one of group 2). ``repeat_kv`` cannot express that, so such a layer
routes its attention through ``UNEVEN_GQA`` (sites.py, beside the Llama family's other
adapters), a registered transformers attention function that gathers one key/value head per
stored query head and then calls the model's own attention implementation (sdpa, eager, ...)
with ``num_key_value_groups = 1``. Layers whose kept groups all keep the same number of query
heads stay on the stock path with that number as ``num_key_value_groups``. The KV cache always
holds one entry per *kept KV group*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from .sites import AttentionSite, HeadSpecError, attention_sites, resolve, sites_by_kind


def kv_group_heads(site: AttentionSite, group: int) -> list[int]:
    """Original indices of the query heads of KV group ``group`` still present in ``site``."""
    if isinstance(group, bool) or not isinstance(group, int) or not 0 <= group < site.total_kv_groups:
        raise HeadSpecError(
            f"KV group {group!r} is out of range for {site.kind} layer {site.layer}: "
            f"valid groups are 0..{site.total_kv_groups - 1} ({site.group_size} query heads each)"
        )
    return [h for h in site.heads if site.kv_group(h) == group]


def kv_groups_to_heads(
    model_or_sites, groups: Mapping[str, Mapping[int, Sequence[int]]]
) -> dict[str, dict[int, list[int]]]:
    """``{kind: {layer: [kv group, ...]}}`` -> ``{kind: {layer: [query heads still present]}}``."""
    sites = model_or_sites if isinstance(model_or_sites, list) else attention_sites(model_or_sites)
    out: dict[str, dict[int, list[int]]] = {}
    for kind, layers in groups.items():
        for layer, gs in layers.items():
            site = resolve(sites, kind, layer)
            heads = []
            for g in gs:
                members = kv_group_heads(site, g)
                if not members:
                    raise HeadSpecError(f"KV group {g} of {kind} layer {layer} was already pruned")
                heads += members
            out.setdefault(kind, {})[layer] = heads
    return out


def kv_group_importance(model: nn.Module, scores: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Importance of each KV group: the sum of its query heads' scores.

    Args:
        scores: ``{kind: [n_layers, n_heads]}`` per query head, as ``head_importance`` returns
            (original numbering).
    Returns:
        ``{kind: [n_layers, n_heads // group_size]}``.
    """
    out = {}
    for kind, group in sites_by_kind(attention_sites(model)).items():
        g = group[0].group_size
        t = scores[kind]
        if t.shape[-1] % g:
            raise HeadSpecError(f"{kind} scores have {t.shape[-1]} heads, not a multiple of the group size {g}")
        out[kind] = t.reshape(*t.shape[:-1], t.shape[-1] // g, g).sum(-1)
    return out


def kv_group_order(model: nn.Module, scores: Mapping[str, torch.Tensor], kind: str = "self") -> list[tuple[int, int]]:
    """Every ``(layer, KV group)`` of ``kind``, least important first (a group's importance: the
    sum of its query heads' ``scores``, ``kv_group_importance``)."""
    groups = kv_group_importance(model, scores)[kind]
    return sorted(
        ((layer, g) for layer in range(groups.shape[0]) for g in range(groups.shape[1])),
        key=lambda lg: float(groups[lg]),
    )
