"""sixteen-heads helpers: gate, score and prune attention heads (Michel, Levy & Neubig, 2019).

Parts, imported one way (book -> zoo -> serving, kv -> sweeps, probes -> heads -> base):

* ``helpers.base``: utilities with no tie to heads (atomic writes, code digests, devices, cores,
  flush-to-zero, the ledger of timed work, a quiet fairseq import);
* ``helpers.heads``: the head library (sites, gates, importance, pruning and KV groups, removal
  kinds, significance, metrics); usable on its own, with ``helpers.base``;
* ``helpers.sweeps``: ablation sweeps, pruning curves and throughput, on the head library;
* ``helpers.probes``: the induction probe and L0-trained gates;
* ``helpers.kv``: the KV cache's bytes, and caches that keep fewer positions or fewer bits;
* ``helpers.serving``: GGUF export, and GGUF files run in llama.cpp in this process (its server,
  and its C API through ``ctypes``), imported only where a file is served;
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
"""

from .heads import (
    SUPPORTED_FAMILIES,
    AttentionSite,
    HeadGates,
    HeadSpec,
    HeadSpecError,
    UnsupportedModelError,
    attention_sites,
    count_parameters,
    family_of,
    head_grid,
    head_importance,
    kept_heads,
    kv_group_importance,
    load_pruned,
    prune_heads,
    prune_kv_groups,
    pruned_heads,
    save_pruned,
)

__all__ = [
    "AttentionSite",
    "HeadGates",
    "HeadSpec",
    "HeadSpecError",
    "SUPPORTED_FAMILIES",
    "UnsupportedModelError",
    "attention_sites",
    "count_parameters",
    "family_of",
    "head_importance",
    "kept_heads",
    "kv_group_importance",
    "head_grid",
    "load_pruned",
    "prune_heads",
    "prune_kv_groups",
    "pruned_heads",
    "save_pruned",
]
