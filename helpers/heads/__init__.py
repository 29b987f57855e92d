"""The head library: gate, score and prune the attention heads of a transformer.

It imports torch, transformers and (for fairseq models) fairseq, and from the rest of ``helpers``
only ``helpers.base``; a project that only wants head gates, importance or pruning uses these two
packages alone. Importing it changes nothing in the process (no float mode, no hooks).

* sites.py: ``attention_sites(model)``, every multi-head attention block of a supported family
  (``SUPPORTED_FAMILIES``) with its kind, layer, head count and head size;
* gates.py: ``HeadGates(model)``, per-head gates xi_h (paper §2.3) as a context manager;
  ``HeadSpec`` (``{kind: {layer: [heads]}}``) names a set of heads everywhere in the library;
* importance.py: ``head_importance``, I_h = E_x |dL(x)/dxi_h| (§4.1, eq. 2), and its
  per-example terms (``importance_terms``, ``from_terms``: I_h of any subset from one pass);
* pruning.py: ``prune_heads`` (physical removal), ``kept_heads``/``pruned_heads``,
  ``save_pruned``/``load_pruned``, ``count_parameters``, ``prune_kv_groups``;
* grouped_query.py: grouped-query attention (Llama family): ``kv_group_importance`` and KV groups
  as head lists (``kv_group_heads``);
* removal.py: zero, mean and resample ablation (``HeadRemoval``, ``reference_outputs``), given to
  ``HeadGates(model, removal=...)``;
* liveness.py: ``dead_heads(model)``, the heads whose |V_h|·|O_h| is a tiny share of their kind's
  largest (``head_norms``): heads training removed before anyone masks them;
* significance.py: the paired bootstrap test of a score change (§3.2), no change within float32's
  resolution (``resolution``), and the fewest units it needs (``MIN_UNITS``, ``require_units``);
* metrics.py: accuracy, Matthews, F1 and tokenised BLEU.

What builds on it lives beside it, imported only where used: ``helpers.sweeps`` (ablation sweeps,
pruning curves, throughput), ``helpers.kv`` (KV-cache sizes and caches), ``helpers.probes``
(the induction probe, L0 gates), ``helpers.serving`` (GGUF export and llama.cpp).
"""

from .gates import Head, HeadGates, HeadSpec, heads_of, spec_of
from .grouped_query import kv_group_heads, kv_group_importance
from .importance import head_importance, importance_terms
from .liveness import dead_heads
from .pruning import (
    count_parameters,
    kept_heads,
    load_pruned,
    prune_heads,
    prune_kv_groups,
    pruned_heads,
    save_pruned,
)
from .removal import REMOVAL_KINDS, HeadRemoval, reference_outputs
from .significance import MIN_UNITS, Bootstrap, SampleTooSmall, paired_bootstrap, require_units
from .sites import (
    SUPPORTED_FAMILIES,
    AttentionSite,
    HeadSpecError,
    UnsupportedModelError,
    attention_sites,
    family_of,
    head_grid,
)

__all__ = [
    # where the heads are
    "AttentionSite",
    "SUPPORTED_FAMILIES",
    "attention_sites",
    "family_of",
    "head_grid",
    "HeadSpecError",
    "UnsupportedModelError",
    # naming heads: a set of heads is a HeadSpec {kind: {layer: [head]}}; one head a Head tuple
    "HeadSpec",
    "Head",
    "heads_of",
    "spec_of",
    # gates xi_h
    "HeadGates",
    "HeadRemoval",
    "REMOVAL_KINDS",
    "reference_outputs",
    # importance I_h
    "head_importance",
    "importance_terms",
    "kv_group_importance",
    "kv_group_heads",
    # heads training left dead
    "dead_heads",
    # physical pruning
    "prune_heads",
    "prune_kv_groups",
    "pruned_heads",
    "kept_heads",
    "save_pruned",
    "load_pruned",
    "count_parameters",
    # is a change real: the paired bootstrap
    "paired_bootstrap",
    "Bootstrap",
    "MIN_UNITS",
    "SampleTooSmall",
    "require_units",
]
