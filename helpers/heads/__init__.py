"""The head library: gate, score and prune the attention heads of a transformer.

It imports torch, transformers and (for fairseq models) fairseq, and from the rest of ``helpers``
only ``helpers.base`` (atomic writes, devices, core counts); a project that only wants head gates
or pruning uses these two packages alone.

* sites.py: ``attention_sites(model)``, every multi-head attention block of a supported family
  (``SUPPORTED_FAMILIES``) with its kind, layer, head count and head size;
* gates.py: ``HeadGates(model)``, per-head gates xi_h (§2.3) as a context manager;
* importance.py: ``head_importance``, I_h = E_x |dL(x)/dxi_h| (§4.1, eq. 2), and its
  per-example terms (``importance_terms``, ``from_terms``: I_h of any subset from one pass);
* pruning.py: ``prune_heads`` (physical removal), ``kept_heads``/``pruned_heads``,
  ``save_pruned``/``load_pruned``, ``count_parameters``;
* grouped_query.py: grouped-query attention (Llama family): ``kv_group_importance``, KV groups
  as head lists, and the routing that keeps unevenly pruned layers exact (``prune_kv_groups``
  is in pruning.py);
* ablation.py: sweeps that mask heads of one configuration after another (§3.2, §3.3);
* config_batches.py: many configurations in one pass (row gates on a repeated batch);
* forked.py: a sweep's passes split over forked processes on a CPU (``sweep_processes``);
* pruning_curves.py: score against the share of heads pruned, in importance, ablation or
  random order (§4.2);
* throughput.py: examples per second and FLOPs, full against pruned (§4.3);
* removal.py: zero, mean and resample ablation (``HeadRemoval``, ``reference_outputs``), given to
  ``HeadGates(model, removal=...)`` or a sweep's ``removal``;
* concrete_gates.py: hard-concrete gates trained with an L0 penalty (Voita et al. 2019), a fourth
  way to choose which heads go;
* kv_cache.py: the KV cache's bytes, predicted from the (pruned) layers and measured from a
  cache; cached greedy generation and its timing; published configurations' arithmetic;
* kv_selective.py, kv_quantized.py, kv_budget.py: other ways to shrink the KV cache, as real
  caches and fast twins: windowed heads and heavy hitters (``SelectiveCache``), quantized caches
  (``quantized_cache``), the bytes any cache holds, and one configuration three ways (``CacheSpec``);
* gguf_export.py: a (pruned) Llama written as a GGUF file llama.cpp loads (``export_gguf``;
  per-layer head counts through its ``deci`` architecture; weights in f32, f16, q8_0 or q4_0);
  it imports ``gguf`` only when called. Running the files is ``helpers.serving``'s;
* induction.py: the repeated-random-tokens probe, induction scores and copying likelihood;
* significance.py: the paired bootstrap test of a score change (§3.2);
* metrics.py: accuracy, Matthews, F1 and tokenised BLEU;
* fairseq_compat.py: importing fairseq 0.12 quietly;
* denormals.py: flush-to-zero, set here, on import, before anything starts torch's threads.
"""

from .denormals import count_denormals, flush_denormals, zero_denormals_

flush_denormals()  # first: torch's worker threads copy the mode only from the thread that starts them

from .ablation import (
    UNMASKED,
    Config,
    all_but_one_configs,
    gated_passes,
    gated_runs,
    one_head_configs,
    single_layer_sweep,
)
from .concrete_gates import ConcreteGates, train_concrete_gates
from .config_batches import config_row_gates, repeat_rows
from .gates import GateRecord, HeadGates, HeadSpec
from .gguf_export import GgufExport, GgufExportError, export_gguf
from .grouped_query import kv_group_heads, kv_group_importance, kv_groups_to_heads
from .importance import from_terms, head_importance, importance_terms, rank_agreement
from .induction import copying_accuracy, copying_nll, induction_scores, repeated_tokens
from .kv_budget import CacheSpec, fast_run, predicted_peak_bytes, pruned_copy, real_run
from .kv_cache import cache_bytes, generate_cached, kv_bytes, kv_bytes_per_token
from .kv_quantized import cached_chunks, quantized_cache, stored_bytes
from .kv_selective import (
    HeavyHitters,
    KeepAll,
    SelectiveCache,
    SinkWindow,
    masked_heads,
    selective_attention,
    window_visibility,
)
from .pruning import (
    count_parameters,
    head_layout,
    kept_heads,
    load_pruned,
    prune_heads,
    prune_kv_groups,
    pruned_heads,
    save_pruned,
)
from .pruning_curves import order_by_ablation, order_by_importance, prunable_share, pruning_curve, random_order
from .removal import REMOVAL_KINDS, HeadRemoval, reference_outputs
from .significance import (
    MIN_UNITS,
    Bootstrap,
    SampleTooSmall,
    chance_flag_rate,
    mean_rank_null,
    mean_rank_p,
    paired_bootstrap,
    require_units,
)
from .sites import (
    SUPPORTED_FAMILIES,
    AttentionSite,
    HeadSpecError,
    UnsupportedModelError,
    attention_sites,
    family_of,
    layout,
)
from .throughput import compare_speed, forward_flops, speed_gains, throughput

__all__ = [
    "AttentionSite",
    "ConcreteGates",
    "Config",
    "GateRecord",
    "HeadGates",
    "HeadRemoval",
    "REMOVAL_KINDS",
    "reference_outputs",
    "HeadSpec",
    "HeadSpecError",
    "SUPPORTED_FAMILIES",
    "UNMASKED",
    "UnsupportedModelError",
    "all_but_one_configs",
    "attention_sites",
    "chance_flag_rate",
    "compare_speed",
    "mean_rank_p",
    "mean_rank_null",
    "MIN_UNITS",
    "SampleTooSmall",
    "require_units",
    "Bootstrap",
    "cache_bytes",
    "config_row_gates",
    "count_denormals",
    "flush_denormals",
    "zero_denormals_",
    "copying_accuracy",
    "copying_nll",
    "count_parameters",
    "generate_cached",
    "head_layout",
    "induction_scores",
    "kv_bytes",
    "kv_bytes_per_token",
    "repeated_tokens",
    "family_of",
    "forward_flops",
    "gated_passes",
    "gated_runs",
    "head_importance",
    "importance_terms",
    "from_terms",
    "rank_agreement",
    "kept_heads",
    "kv_group_heads",
    "kv_group_importance",
    "kv_groups_to_heads",
    "layout",
    "load_pruned",
    "one_head_configs",
    "order_by_ablation",
    "order_by_importance",
    "paired_bootstrap",
    "prunable_share",
    "prune_heads",
    "prune_kv_groups",
    "pruned_heads",
    "pruning_curve",
    "random_order",
    "repeat_rows",
    "save_pruned",
    "single_layer_sweep",
    "speed_gains",
    "throughput",
    "train_concrete_gates",
    "CacheSpec",
    "fast_run",
    "predicted_peak_bytes",
    "pruned_copy",
    "real_run",
    "cached_chunks",
    "quantized_cache",
    "stored_bytes",
    "HeavyHitters",
    "KeepAll",
    "SelectiveCache",
    "SinkWindow",
    "masked_heads",
    "selective_attention",
    "window_visibility",
    "GgufExport",
    "GgufExportError",
    "export_gguf",
]
