"""sixteen-heads helpers: gate, score and prune attention heads (Michel, Levy & Neubig, 2019).

Public API (see each module for shapes and units):

* ``attention_sites(model)``: every multi-head attention block (sites.py)
* ``HeadGates(model)``: per-head gates xi_h as a context manager (gates.py)
* ``head_importance(model, batches, loss_fn, ...)``: I_h = E_x |dL/dxi_h| (importance.py)
* ``prune_heads(model, {kind: {layer: [heads]}})``: physical removal (pruning.py)
* ``save_pruned`` / ``load_pruned``: round-trip a pruned model (pruning.py)
"""
from .gates import GateRecord, HeadGates, HeadSpec
from .importance import head_importance
from .pruning import kept_heads, load_pruned, prune_heads, pruned_heads, save_pruned
from .sites import (
    SUPPORTED_FAMILIES,
    AttentionSite,
    HeadSpecError,
    UnsupportedModelError,
    attention_sites,
    family_of,
    layout,
)

__all__ = [
    "AttentionSite",
    "GateRecord",
    "HeadGates",
    "HeadSpec",
    "HeadSpecError",
    "SUPPORTED_FAMILIES",
    "UnsupportedModelError",
    "attention_sites",
    "family_of",
    "head_importance",
    "kept_heads",
    "layout",
    "load_pruned",
    "prune_heads",
    "pruned_heads",
    "save_pruned",
]
