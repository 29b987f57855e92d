"""Physical head pruning (paper §4.3): remove heads from the weights, not just mask them.

Removing head h of a block deletes rows ``[h * head_dim, (h + 1) * head_dim)`` of the query,
key and value projections and the same columns of the output projection W_o; W_o's bias stays
(it is shared by all heads). The result computes exactly what the gated model computes with
those gates at zero, with fewer parameters and FLOPs.

GPT-2 fuses Q, K and V into one ``Conv1D`` (``c_attn``): the head's columns of each of its three
blocks go. Under grouped-query attention (Llama family, grouped_query.py) a head is a query head:
its query rows and W_o columns go at once, and its KV group's key and value rows go with the
group's last query head.

A block may lose every head: it then returns W_o's bias alone, as the gated model does.

transformers 5.x has neither ``head_mask`` nor ``prune_heads``; fairseq's own
``_adaptive_prune_heads`` keeps a count, not an arbitrary set. This module does both families
the same way and records the kept heads (original numbering) on each block, so pruning can be
repeated, saved (``save_pruned``) and restored (``load_pruned``).
"""

from __future__ import annotations

import json
import os
import re
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import nn

from ..base.atomic import atomic_path
from ..base.denormals import zero_denormals_
from ..base.fairseq_compat import import_fairseq
from .gates import HeadSpec
from .grouped_query import kv_groups_to_heads
from .sites import FAMILIES, AttentionSite, HeadSpecError, attention_sites, check_head, family_of, mark_heads, resolve

PRUNED_HEADS_FILE = "pruned_heads.json"


def prune_heads(model: nn.Module, heads: HeadSpec) -> dict[str, dict[int, list[int]]]:
    """Remove ``heads`` (``{kind: {layer: [head, ...]}}``, original numbering) in place.

    Everything is validated before any weight changes, so a bad request changes nothing.

    What changes on the model, for good: the query, key, value and W_o weights of each block
    lose the heads' rows and columns (new ``nn.Parameter`` objects: an optimizer built before
    holds the old ones); the block records its head count where its family reads it and keeps
    the original numbers of its kept heads in attributes (``_sixteen_heads_kept``,
    ``_sixteen_heads_total``); a block left with no head gets its ``forward`` rebound to one that
    returns W_o's bias alone; an unevenly pruned grouped-query layer is routed through its own
    attention function. Nothing undoes it: prune a copy (``copy.deepcopy``), or reload the
    model; ``save_pruned``/``load_pruned`` round-trip the result.

    Returns:
        ``{kind: {layer: [heads still present]}}`` for every block of the model.

    Raises:
        HeadSpecError: unknown kind, layer or head out of range, a head listed twice, or a
            head that was already pruned.
    """
    sites = attention_sites(model)
    plan: list[tuple[AttentionSite, list[int]]] = []
    for kind, layers in heads.items():
        for layer, hs in layers.items():
            site = resolve(sites, kind, layer)
            hs = list(hs)
            for h in hs:
                check_head(site, h)
                if h not in site.heads:
                    raise HeadSpecError(f"head {h} of {kind} layer {layer} was already pruned")
            if len(set(hs)) != len(hs):
                raise HeadSpecError(f"{kind} layer {layer}: a head is listed twice in {hs}")
            plan.append((site, hs))
    for site, hs in plan:
        if hs:
            _remove(site, set(hs))
    return kept_heads(model)


def prune_kv_groups(
    model: nn.Module, groups: Mapping[str, Mapping[int, Sequence[int]]]
) -> dict[str, dict[int, list[int]]]:
    """Remove whole KV groups, ``{kind: {layer: [group, ...]}}`` (original numbering): every
    query head of each group still present, and with them the group's key and value heads.

    Returns what ``prune_heads`` returns: the query heads still present, per layer.
    """
    return prune_heads(model, kv_groups_to_heads(model, groups))


def kept_heads(model: nn.Module) -> dict[str, dict[int, list[int]]]:
    """``{kind: {layer: [original indices of the heads still present]}}``."""
    out: dict[str, dict[int, list[int]]] = {}
    for s in attention_sites(model):
        out.setdefault(s.kind, {})[s.layer] = s.heads
    return out


def pruned_heads(model: nn.Module) -> dict[str, dict[int, list[int]]]:
    """``{kind: {layer: [original indices removed]}}``, only layers that lost a head."""
    out: dict[str, dict[int, list[int]]] = {}
    for s in attention_sites(model):
        gone = sorted(set(range(s.total_heads)) - set(s.heads))
        if gone:
            out.setdefault(s.kind, {})[s.layer] = gone
    return out


LAYOUT_KEY = "pruned_head_layout"  # the key save_pruned adds to config.json


def kept_head_counts(model: nn.Module) -> dict[str, dict[str, list[int]]]:
    """Per attention kind, the heads each layer holds now: ``{kind: {"num_attention_heads":
    [per layer], "num_key_value_heads": [per layer]}}`` (key/value heads: the kept KV groups
    under grouped-query attention, else equal to the query heads)."""
    out: dict[str, dict[str, list[int]]] = {}
    for s in attention_sites(model):
        kind = out.setdefault(s.kind, {"num_attention_heads": [], "num_key_value_heads": []})
        kind["num_attention_heads"].append(len(s.heads))
        kind["num_key_value_heads"].append(len(s.kv_groups))
    return out


def _remove(site: AttentionSite, remove: set[int]) -> None:
    total, before, groups_before = site.total_heads, site.heads, site.kv_groups
    keep = [h for h in before if h not in remove]
    d = site.head_dim
    q_rows = _head_rows([i for i, h in enumerate(before) if h not in remove], d, site.output.weight.device)
    if site.fused_qkv:  # GPT-2's c_attn: [query | key | value] blocks of the same width
        width = len(before) * d
        _keep_outputs(site.query, torch.cat([q_rows, q_rows + width, q_rows + 2 * width]))
    else:
        kept_groups = {site.kv_group(h) for h in keep}
        kv_rows = (
            q_rows
            if site.group_size == 1
            else _head_rows([i for i, g in enumerate(groups_before) if g in kept_groups], d, q_rows.device)
        )
        _keep_outputs(site.query, q_rows)
        _keep_outputs(site.key, kv_rows)
        _keep_outputs(site.value, kv_rows)
    _keep_inputs(site.output, q_rows)
    mark_heads(site.module, keep, total)
    family = FAMILIES[site.family]
    family.set_head_count(site, len(keep), d)
    if not keep:  # rebinds the block's forward (an instance attribute): only W_o's bias is left
        site.module.forward = types.MethodType(family.empty_forward, site.module)


def _head_rows(positions: list[int], head_dim: int, device: torch.device) -> torch.Tensor:
    """Indices of the rows of the heads stored at ``positions`` in a ``[heads * head_dim]`` axis."""
    return torch.tensor(
        [p * head_dim + j for p in positions for j in range(head_dim)], dtype=torch.long, device=device
    )


def _keep_outputs(proj: nn.Module, idx: torch.Tensor) -> None:
    """Keep output features ``idx`` of an ``nn.Linear`` (weight ``[out, in]``) or a ``Conv1D``
    (weight ``[in, out]``)."""
    linear = isinstance(proj, nn.Linear)
    w = proj.weight.detach().index_select(0 if linear else 1, idx)
    proj.weight = nn.Parameter(w.clone(), proj.weight.requires_grad)
    if proj.bias is not None:
        proj.bias = nn.Parameter(proj.bias.detach().index_select(0, idx).clone(), proj.bias.requires_grad)
    if linear:
        proj.out_features = len(idx)
    else:
        proj.nf = len(idx)


def _keep_inputs(proj: nn.Module, idx: torch.Tensor) -> None:
    """Keep input features ``idx`` of an ``nn.Linear`` or a ``Conv1D``; the bias is untouched."""
    linear = isinstance(proj, nn.Linear)
    w = proj.weight.detach().index_select(1 if linear else 0, idx)
    proj.weight = nn.Parameter(w.clone(), proj.weight.requires_grad)
    if linear:
        proj.in_features = len(idx)
    else:
        proj.nx = len(idx)


# ---- saving and loading a pruned model --------------------------------------------------------
def save_pruned(model: nn.Module, directory: str | os.PathLike) -> Path:
    """Save ``model`` (pruned or not) so that ``load_pruned`` rebuilds it exactly.

    transformers: ``save_pretrained`` files. fairseq: ``model.pt`` (args and state dict) and
    the dictionaries. Both: ``pruned_heads.json`` with the removed heads, original numbering,
    and the ``kept_head_counts`` (per kind and layer, the query and key/value heads kept), which
    transformers models also record in ``config.json`` under ``"pruned_head_layout"``.
    Denormal weights (below float32's normal range) are set to zero first, in ``model`` too
    (``denormals.zero_denormals_``), so the saved model never computes on denormals.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    family = family_of(model)
    zero_denormals_(model)
    layout = kept_head_counts(model)
    if family == "fairseq":
        _save_fairseq(model, directory)
    else:  # config.json records the per-layer head counts (and so does the model's config from now on)
        setattr(model.config, LAYOUT_KEY, layout)
        model.save_pretrained(directory)
    record = {
        "format": 1,
        "family": family,
        "pruned": {k: {str(layer): hs for layer, hs in v.items()} for k, v in pruned_heads(model).items()},
        "layout": layout,
    }
    with atomic_path(directory / PRUNED_HEADS_FILE) as tmp:
        tmp.write_text(json.dumps(record, indent=2))
    return directory


def load_pruned(directory: str | os.PathLike, model: nn.Module | None = None) -> nn.Module:
    """Load what ``save_pruned`` wrote, in eval mode.

    Args:
        directory: the folder ``save_pruned`` wrote.
        model: optionally, an unpruned model of the same architecture to prune and fill;
            by default it is rebuilt from the saved config (transformers) or args (fairseq).
    """
    directory = Path(directory)
    record_path = directory / PRUNED_HEADS_FILE
    if not record_path.exists():
        raise FileNotFoundError(f"{record_path} is missing: was this folder written by helpers.save_pruned?")
    record = json.loads(record_path.read_text())
    family = record["family"]
    if model is None:
        model = _build_fairseq(directory) if family == "fairseq" else _build_transformers(directory)
    elif family_of(model) != family:
        raise ValueError(f"{directory} holds a {family} model but a {family_of(model)} model was given")
    prune_heads(model, {k: {int(layer): hs for layer, hs in v.items()} for k, v in record["pruned"].items()})
    if "layout" in record and kept_head_counts(model) != record["layout"]:
        raise ValueError(
            f"{directory}: the model rebuilt from {PRUNED_HEADS_FILE} holds {kept_head_counts(model)} heads, "
            f"the saved layout says {record['layout']}: the folder was edited or written by another version"
        )
    if family == "fairseq":
        state = torch.load(directory / "model.pt", map_location="cpu", weights_only=False)["model"]
    else:
        from safetensors.torch import load_file

        state = load_file(str(directory / "model.safetensors"))
    _load_state(model, state)
    return model.eval()


def _load_state(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise ValueError(f"saved weights have keys this model lacks: {unexpected[:5]}")
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    # A key may be absent only when it is tied to (the same tensor as) a key that was loaded.
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded_ids = {id(p) for name, p in params.items() if name in state}
    # transformers also lists keys it recomputes itself (e.g. Marian's sinusoidal positions).
    recomputed = [re.compile(p) for p in (getattr(model, "_keys_to_ignore_on_load_missing", None) or [])]
    untied = [
        k
        for k in missing
        if not (k in params and id(params[k]) in loaded_ids) and not any(p.search(k) for p in recomputed)
    ]
    if untied:
        raise ValueError(f"saved weights lack keys: {untied[:5]}")


def _build_transformers(directory: Path) -> nn.Module:
    import transformers

    config = transformers.AutoConfig.from_pretrained(directory)
    cls = getattr(transformers, (config.architectures or [None])[0] or "", None)
    if cls is None:
        raise ValueError(f"{directory}/config.json names no known architecture: {config.architectures}")
    return cls._from_config(config)


def _save_fairseq(model: nn.Module, directory: Path) -> None:
    args = getattr(model, "args", None)
    if args is None:
        raise ValueError("saving needs a fairseq TransformerModel built from args (model.args is missing)")
    model.encoder.dictionary.save(str(directory / "dict.src.txt"))
    model.decoder.dictionary.save(str(directory / "dict.tgt.txt"))
    with atomic_path(directory / "model.pt") as tmp:
        torch.save({"args": args, "model": model.state_dict()}, tmp)


def _build_fairseq(directory: Path) -> nn.Module:
    import_fairseq()
    from fairseq.data import Dictionary
    from fairseq.models.transformer import TransformerModel

    args = torch.load(directory / "model.pt", map_location="cpu", weights_only=False)["args"]
    task = types.SimpleNamespace(
        source_dictionary=Dictionary.load(str(directory / "dict.src.txt")),
        target_dictionary=Dictionary.load(str(directory / "dict.tgt.txt")),
    )
    return TransformerModel.build_model(args, task)


def count_parameters(model: nn.Module) -> int:
    """Number of parameters of ``model`` (each shared tensor once); drops as heads are pruned."""
    return sum(p.numel() for p in model.parameters())
