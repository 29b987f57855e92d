"""sixteen-heads helpers: gate, score and prune attention heads (Michel, Levy & Neubig, 2019).

Five parts, imported one way (book -> zoo and serving -> heads -> base):

* ``helpers.base``: utilities with no tie to heads (atomic writes, code digests, devices, cores);
* ``helpers.heads``: the head library (sites, gates, importance, pruning, sweeps, curves,
  throughput, significance, metrics); usable on its own, with ``helpers.base``;
* ``helpers.serving``: GGUF files run in llama.cpp in this process (its server, and its C API
  through ``ctypes``), imported only where a file is served;
* ``helpers.zoo``: models and data (generated tasks, real corpora, training recipes, the
  paper's downloads, the model cache, and ``registry``: where every model comes from);
* ``helpers.book``: the book's machinery (profiles, runner, results, sweep cache, sharding,
  the paper's reported values, the verdicts and the scorecard).

The head library's main names are here too (see each module for shapes and units):

* ``attention_sites(model)``: every multi-head attention block (heads/sites.py)
* ``HeadGates(model)``: per-head gates xi_h as a context manager (heads/gates.py)
* ``head_importance(model, batches, loss_fn, ...)``: I_h = E_x |dL/dxi_h| (heads/importance.py)
* ``prune_heads(model, {kind: {layer: [heads]}})``: physical removal (heads/pruning.py)
* ``save_pruned`` / ``load_pruned``: round-trip a pruned model (heads/pruning.py)
* ``kv_group_importance`` / ``prune_kv_groups``: grouped-query attention's KV groups
  (heads/grouped_query.py)
* ``export_gguf``: a (pruned) Llama as a GGUF file llama.cpp loads (heads/gguf_export.py)
"""

from .heads import (
    SUPPORTED_FAMILIES,
    AttentionSite,
    GateRecord,
    HeadGates,
    HeadSpec,
    HeadSpecError,
    UnsupportedModelError,
    attention_sites,
    count_parameters,
    export_gguf,
    family_of,
    head_importance,
    kept_heads,
    kv_group_importance,
    layout,
    load_pruned,
    prune_heads,
    prune_kv_groups,
    pruned_heads,
    save_pruned,
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
    "count_parameters",
    "export_gguf",
    "family_of",
    "head_importance",
    "kept_heads",
    "kv_group_importance",
    "layout",
    "load_pruned",
    "prune_heads",
    "prune_kv_groups",
    "pruned_heads",
    "save_pruned",
]
