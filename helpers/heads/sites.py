"""Attention sites: every multi-head attention block of a model, found the same way for each family.

An *attention site* is one multi-head attention block (paper §2.2, Eq. 1) with

* ``kind``: ``"self"`` for models with a single stack, encoder-only (BERT) or decoder-only (GPT-2,
  Llama: there ``"self"`` is the causal self-attention); ``"enc_self"``, ``"enc_dec"`` or
  ``"dec_self"`` for encoder-decoder models (the paper's Enc-Enc, Enc-Dec and Dec-Dec);
* ``layer``: 0-based layer index inside its stack;
* handles to the query/key/value projections (``[d_model] -> [n_heads * head_dim]``) and the
  output projection W_o (``[n_heads * head_dim] -> [d_model]``), whose *input* is the
  concatenation of the per-head context vectors. Gating (gates.py) and importance
  (importance.py) act on that input; pruning (pruning.py) slices those four matrices.

Heads keep their original numbering after pruning: ``site.heads`` lists the original indices
still present, in the order their weights are stored.

Grouped-query attention (Llama, Qwen2/3, Mistral, Gemma 3): a head is a *query* head. The
``group_size`` query heads ``g * group_size .. (g + 1) * group_size - 1`` share key/value head
``g`` (a *KV group*); ``site.kv_groups`` lists the groups still present. Multi-head attention is
the case ``group_size == 1``.

Every family's knowledge lives here, in one table (``FAMILIES``): where its blocks are, how a
block records a new head count, what it returns with no head left, and (fairseq) the fused
kernel the gates switch off. Gates (gates.py) and pruning (pruning.py) read the table and know
no family.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

ENCODER_ONLY_KINDS = ("self",)
SEQ2SEQ_KINDS = ("enc_self", "enc_dec", "dec_self")

# model_type values (transformers' config.model_type) of the families tested in tests/.
_BERT_LIKE_TYPES = ("bert", "roberta", "electra", "xlm-roberta")
_DISTILBERT_TYPES = ("distilbert",)
_BART_LIKE_TYPES = ("bart", "marian")
_GPT2_TYPES = ("gpt2",)
_LLAMA_LIKE_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text")

SUPPORTED_FAMILIES = (
    "transformers BERT-like encoders (model_type in "
    + ", ".join(_BERT_LIKE_TYPES + _DISTILBERT_TYPES)
    + "; MiniLM checkpoints are model_type 'bert'), "
    "transformers encoder-decoders (model_type in " + ", ".join(_BART_LIKE_TYPES) + "), "
    "transformers decoder-only LMs (model_type in "
    + ", ".join(_GPT2_TYPES + _LLAMA_LIKE_TYPES)
    + "; grouped-query attention included), "
    "and fairseq's TransformerModel (fairseq.models.transformer)"
)

# Attributes this library keeps on each attention module.
_KEPT_ATTR = "_sixteen_heads_kept"
_TOTAL_ATTR = "_sixteen_heads_total"
_KV_INDEX_ATTR = "_sixteen_heads_kv_index"  # an unevenly pruned GQA layer: each query head's KV head
UNEVEN_GQA = "sixteen_heads_uneven_gqa"  # the attention function such a layer is routed through


class UnsupportedModelError(TypeError):
    """The model is not one of the families listed in ``SUPPORTED_FAMILIES``."""


class HeadSpecError(ValueError):
    """A head specification names an unknown kind, a layer or head out of range, or a pruned head."""


@dataclass(eq=False, kw_only=True)
class AttentionSite:
    """One multi-head attention block.

    Attributes:
        kind: ``"self"``, ``"enc_self"``, ``"enc_dec"`` or ``"dec_self"``.
        layer: 0-based layer index within the stack of that kind.
        family: ``"bert"``, ``"distilbert"``, ``"bart"``, ``"gpt2"``, ``"llama"`` or ``"fairseq"``.
        module: the module that computes the per-head attention (holds query/key/value).
        query, key, value: projections ``d_model -> num_heads * head_dim`` (key and value:
            ``num_kv_groups * head_dim`` under grouped-query attention). GPT-2 fuses the
            three into one ``Conv1D`` (``c_attn``, ``d_model -> 3 * num_heads * head_dim``):
            then query, key and value are that same module and ``fused_qkv`` is True.
        output: projection W_o ``num_heads * head_dim -> d_model``.
        head_dim: size of one head's context vector.
        batch_dim: the batch axis of W_o's input (0 for transformers, 1 for fairseq's
            time-first layout); the last axis is always ``num_heads * head_dim``.
        group_size: query heads per key/value head (1 without grouped-query attention).
        fused_qkv: query, key and value are one fused projection (GPT-2's ``c_attn``).
    """

    kind: str
    layer: int
    family: str
    module: nn.Module
    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    output: nn.Linear
    head_dim: int
    batch_dim: int
    group_size: int = 1
    fused_qkv: bool = False

    @property
    def heads(self) -> list[int]:
        """Original indices of the heads still present, in storage order."""
        kept = getattr(self.module, _KEPT_ATTR, None)
        return list(kept) if kept is not None else list(range(self.total_heads))

    @property
    def num_heads(self) -> int:
        """Number of heads present now (after any pruning)."""
        return len(self.heads)

    @property
    def total_heads(self) -> int:
        """Number of heads the block had before any pruning."""
        total = getattr(self.module, _TOTAL_ATTR, None)
        if total is not None:
            return total
        return _out_width(self.query) // self.head_dim // (3 if self.fused_qkv else 1)

    def kv_group(self, head: int) -> int:
        """The key/value group of query head ``head`` (original numbering)."""
        return head // self.group_size

    @property
    def kv_groups(self) -> list[int]:
        """Original indices of the key/value groups still present (a group stays while one of
        its query heads does), in storage order."""
        return sorted({self.kv_group(h) for h in self.heads})

    @property
    def total_kv_groups(self) -> int:
        """Number of key/value groups before any pruning."""
        return self.total_heads // self.group_size

    def __repr__(self) -> str:
        return (
            f"AttentionSite(kind={self.kind!r}, layer={self.layer}, family={self.family!r}, "
            f"num_heads={self.num_heads}/{self.total_heads}, head_dim={self.head_dim})"
        )


def _out_width(proj: nn.Module) -> int:
    """Output width of an ``nn.Linear`` or of transformers' ``Conv1D`` (GPT-2), which calls it ``nf``."""
    return proj.out_features if isinstance(proj, nn.Linear) else proj.nf


def attention_sites(model: nn.Module) -> list[AttentionSite]:
    """Every attention block of ``model``, ordered by kind (encoder first) then layer.

    Raises:
        UnsupportedModelError: the model is not in one of the supported families.
    """
    order = {k: i for i, k in enumerate(ENCODER_ONLY_KINDS + SEQ2SEQ_KINDS)}
    return sorted(_family_entry(model).find(model), key=lambda s: (order[s.kind], s.layer))


def family_of(model: nn.Module) -> str:
    """``"bert"``, ``"distilbert"``, ``"bart"``, ``"gpt2"``, ``"llama"`` or ``"fairseq"``."""
    return _family_name(model)


def sites_by_kind(sites: list[AttentionSite]) -> dict[str, list[AttentionSite]]:
    """Group sites by kind; within a kind, ``result[kind][layer]`` is that layer's site."""
    grouped: dict[str, list[AttentionSite]] = {}
    for s in sites:
        grouped.setdefault(s.kind, []).append(s)
    for group in grouped.values():
        group.sort(key=lambda s: s.layer)
    return grouped


def head_grid(model: nn.Module) -> dict[str, tuple[int, int]]:
    """``{kind: (n_layers, n_heads)}`` with ``n_heads`` counted before any pruning."""
    return {
        kind: (len(group), max(s.total_heads for s in group))
        for kind, group in sites_by_kind(attention_sites(model)).items()
    }


def resolve(model_or_sites, kind: str, layer: int) -> AttentionSite:
    """The site of ``kind`` at ``layer``, or a HeadSpecError that lists what exists."""
    sites = model_or_sites if isinstance(model_or_sites, list) else attention_sites(model_or_sites)
    grouped = sites_by_kind(sites)
    if kind not in grouped:
        raise HeadSpecError(f"unknown attention kind {kind!r}; this model has kinds {sorted(grouped)}")
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise HeadSpecError(f"layer must be an int, got {layer!r} for kind {kind!r}")
    n = len(grouped[kind])
    if not 0 <= layer < n:
        raise HeadSpecError(f"layer {layer} is out of range for kind {kind!r}: valid layers are 0..{n - 1}")
    return grouped[kind][layer]


def check_head(site: AttentionSite, head: int) -> None:
    """Raise HeadSpecError unless ``head`` is an original head index of ``site``."""
    if isinstance(head, bool) or not isinstance(head, int):
        raise HeadSpecError(f"head must be an int, got {head!r} ({site.kind} layer {site.layer})")
    if not 0 <= head < site.total_heads:
        raise HeadSpecError(
            f"head {head} is out of range for {site.kind} layer {site.layer}: "
            f"valid heads are 0..{site.total_heads - 1}"
        )


def mark_heads(module: nn.Module, kept: list[int], total: int) -> None:
    """Record on ``module`` which original heads remain (used by pruning and loading)."""
    setattr(module, _KEPT_ATTR, list(kept))
    setattr(module, _TOTAL_ATTR, int(total))


# --------------------------------------------------------------------------------------
# Every family's knowledge in one place: where its attention blocks are, how a block records a
# new head count once pruning sliced its weights, what it returns with no head left (only W_o's
# bias reaches the residual stream), and, for a fused kernel the gates' hook cannot reach, how
# the gates switch it off.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """One family's adapters. ``find(model)``: its sites; ``set_head_count(site, heads,
    head_dim)``: record the count pruning left; ``empty_forward``: the block's forward once it
    has no head left (``prune_heads`` binds it in place of the block's own); ``gate_switch(site,
    must_gate)``: installed by ``HeadGates`` on the block, returns its undo (None: not needed)."""

    find: Callable[[nn.Module], list[AttentionSite]]
    set_head_count: Callable[[AttentionSite, int, int], None]
    empty_forward: Callable[..., tuple]
    gate_switch: Callable[[AttentionSite, Callable[[], bool]], Callable[[], None]] | None = None


def _site(
    kind: str,
    layer: int,
    *,
    family: str,
    module: nn.Module,
    projections: tuple[nn.Module, nn.Module, nn.Module, nn.Module],
    head_dim: int,
    batch_dim: int = 0,
    **more,
) -> AttentionSite:
    """An ``AttentionSite`` of ``module`` with its ``(query, key, value, output)`` projections."""
    query, key, value, output = projections
    return AttentionSite(
        kind=kind,
        layer=layer,
        family=family,
        module=module,
        query=query,
        key=key,
        value=value,
        output=output,
        head_dim=head_dim,
        batch_dim=batch_dim,
        **more,
    )


def _bert_sites(model: nn.Module) -> list[AttentionSite]:
    return [
        _site(
            "self",
            i,
            family="bert",
            module=(a := blk.attention.self),
            projections=(a.query, a.key, a.value, blk.attention.output.dense),
            head_dim=a.attention_head_size,
        )
        for i, blk in enumerate(model.base_model.encoder.layer)
    ]


def _distilbert_sites(model: nn.Module) -> list[AttentionSite]:
    return [
        _site(
            "self",
            i,
            family="distilbert",
            module=(a := blk.attention),
            projections=(a.q_lin, a.k_lin, a.v_lin, a.out_lin),
            head_dim=a.attention_head_size,
        )
        for i, blk in enumerate(model.base_model.transformer.layer)
    ]


def _seq2seq_sites(encoder_layers, decoder_layers, family: str, batch_dim: int) -> list[AttentionSite]:
    def site(kind: str, i: int, attn: nn.Module) -> AttentionSite:
        projections = (attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj)
        return _site(
            kind, i, family=family, module=attn, projections=projections, head_dim=attn.head_dim, batch_dim=batch_dim
        )

    sites = [site("enc_self", i, blk.self_attn) for i, blk in enumerate(encoder_layers)]
    for i, blk in enumerate(decoder_layers):
        if getattr(blk, "encoder_attn", None) is not None:
            sites.append(site("enc_dec", i, blk.encoder_attn))
        sites.append(site("dec_self", i, blk.self_attn))
    return sites


def _bart_sites(model: nn.Module) -> list[AttentionSite]:
    base = model.base_model
    return _seq2seq_sites(base.encoder.layers, base.decoder.layers, "bart", batch_dim=0)


def _fairseq_sites(model: nn.Module) -> list[AttentionSite]:
    return _seq2seq_sites(model.encoder.layers, model.decoder.layers, "fairseq", batch_dim=1)


def _gpt2_sites(model: nn.Module) -> list[AttentionSite]:
    return [
        _site(
            "self",
            i,
            family="gpt2",
            module=blk.attn,
            projections=(blk.attn.c_attn, blk.attn.c_attn, blk.attn.c_attn, blk.attn.c_proj),
            head_dim=blk.attn.head_dim,
            fused_qkv=True,
        )
        for i, blk in enumerate(model.base_model.h)
    ]


def _llama_sites(model: nn.Module) -> list[AttentionSite]:
    config = model.config
    group_size = config.num_attention_heads // config.num_key_value_heads
    return [
        _site(
            "self",
            i,
            family="llama",
            module=(a := blk.self_attn),
            projections=(a.q_proj, a.k_proj, a.v_proj, a.o_proj),
            head_dim=a.head_dim,
            group_size=group_size,
        )
        for i, blk in enumerate(model.base_model.layers)
    ]


def _is_fairseq_transformer(model: nn.Module) -> bool:
    if not type(model).__module__.startswith("fairseq"):
        return False
    from fairseq.models.transformer import TransformerModelBase  # already imported: the model is one

    return isinstance(model, TransformerModelBase)


def _family_entry(model: nn.Module) -> Family:
    """The ``FAMILIES`` entry of ``model``'s family; ``UnsupportedModelError`` outside them."""
    return FAMILIES[_family_name(model)]


def _family_name(model: nn.Module) -> str:
    if _is_fairseq_transformer(model):
        return "fairseq"
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type in _BERT_LIKE_TYPES and not getattr(config, "is_decoder", False):
        return "bert"
    if model_type in _DISTILBERT_TYPES:
        return "distilbert"
    if model_type in _BART_LIKE_TYPES:
        return "bart"
    if model_type in _GPT2_TYPES:
        if getattr(config, "add_cross_attention", False):
            raise UnsupportedModelError(
                "GPT-2 with cross-attention (add_cross_attention=True) is not supported; "
                f"helpers supports {SUPPORTED_FAMILIES}."
            )
        return "gpt2"
    if model_type in _LLAMA_LIKE_TYPES:
        return "llama"
    raise UnsupportedModelError(
        f"{type(model).__name__} (model_type={model_type!r}) is not supported. helpers supports {SUPPORTED_FAMILIES}."
    )


def _count_bert(site, n, d):
    site.module.num_attention_heads, site.module.all_head_size = n, n * d


def _count_distilbert(site, n, d):
    site.module.n_heads = n


def _count_bart(site, n, d):
    site.module.num_heads = n


def _count_gpt2(site, n, d):
    # GPT-2 splits c_attn's output into query, key and value of split_size each.
    site.module.num_heads, site.module.split_size = n, n * d


def _count_llama(site, n, d):
    _route_query_heads(site)  # uneven groups need their own routing to stay exact


def _count_fairseq(site, n, d):
    # fairseq reads embed_dim in its reshapes; its fused kernel assumes the full width.
    m = site.module
    m.num_heads, m.embed_dim = n, n * d
    m._set_skip_embed_dim_check()


PHANTOM_WIDTH = 1  # the head width of an emptied layer's cache entry


def _phantom_cache_entry(cache, hidden_states: torch.Tensor, layer_idx: int) -> None:
    """Keep a decoder cache's length right when a layer has no head left: transformers reads a
    layer's key length to place new positions, so cache one all-zero head of width 1 that nothing
    attends with (2 numbers per token for keys and values: ``kv.cache.kv_bytes`` counts them)."""
    from transformers.cache_utils import EncoderDecoderCache

    if isinstance(cache, EncoderDecoderCache):
        cache = cache.self_attention_cache
    b, t = hidden_states.shape[:2]
    phantom = hidden_states.new_zeros(b, 1, t, PHANTOM_WIDTH)
    cache.update(phantom, phantom, layer_idx)


def _empty_bert(self, hidden_states, *args, **kwargs):
    # BertSelfAttention returns the concatenated heads; BertSelfOutput applies W_o after it.
    return hidden_states.new_zeros(*hidden_states.shape[:-1], 0), None


def _empty_distilbert(self, hidden_states, *args, **kwargs):
    return self.out_lin(hidden_states.new_zeros(*hidden_states.shape[:-1], 0)), None


def _empty_bart(self, hidden_states, key_value_states=None, past_key_values=None, attention_mask=None, **kwargs):
    if past_key_values is not None and key_value_states is None:
        _phantom_cache_entry(past_key_values, hidden_states, self.layer_idx)
    return self.out_proj(hidden_states.new_zeros(*hidden_states.shape[:-1], 0)), None


def _empty_gpt2(self, hidden_states, past_key_values=None, *args, **kwargs):
    if past_key_values is not None:
        _phantom_cache_entry(past_key_values, hidden_states, self.layer_idx)
    # Conv1D cannot take a 0-wide input; with no head left it would return its bias, as here.
    out = hidden_states.new_zeros(*hidden_states.shape[:-1], self.c_proj.nf) + self.c_proj.bias
    return self.resid_dropout(out), None


def _empty_llama(self, hidden_states, position_embeddings=None, attention_mask=None, past_key_values=None, **kwargs):
    if past_key_values is not None:
        _phantom_cache_entry(past_key_values, hidden_states, self.layer_idx)
    return self.o_proj(hidden_states.new_zeros(*hidden_states.shape[:-1], 0)), None


def _empty_fairseq(self, query, key=None, value=None, *args, **kwargs):
    t, b = query.shape[:2]
    return self.out_proj(query.new_zeros(t, b, 0)), None


def _fairseq_gate_switch(site: AttentionSite, must_gate: Callable[[], bool]) -> Callable[[], None]:
    """fairseq's fused attention kernel consumes W_o's input internally, where no hook reaches it:
    while ``must_gate()`` a pre-hook on the block sends it down its explicit path (the one fairseq
    itself takes for pruned heads). Returns the undo, which leaves a block pruned meanwhile off
    the fused kernel for good (its width no longer matches the kernel's)."""
    module = site.module
    original = module.skip_embed_dim_check

    def hook(module: nn.Module, args: tuple) -> None:
        module.skip_embed_dim_check = original or must_gate()

    handle = module.register_forward_pre_hook(hook)

    def undo() -> None:
        handle.remove()
        module.skip_embed_dim_check = original or site.num_heads != site.total_heads

    return undo


@contextmanager
def explicit_attention(model: nn.Module) -> Iterator[None]:
    """Within the block every fairseq attention block of ``model`` takes its explicit path, the
    one the gates need, gated or not. fairseq otherwise runs a block whose gates are all ones on
    torch's fused kernel, whose float rounding differs from the explicit path's (by up to 1.9
    float32 epsilons of a sentence's loss on the tests' tiny models; ``make gpu-check`` measures a
    GPU), so a sweep's unmasked run and its masked runs would differ by more than the masked heads. Sweeps
    enter it around their unmasked and masked runs alike. Other families have one path; for them
    it changes nothing. On exit each block gets back its flag, a block pruned meanwhile staying
    off the fused kernel (its width no longer matches it)."""
    sites = [s for s in attention_sites(model) if s.family == "fairseq"]
    saved = [s.module.skip_embed_dim_check for s in sites]
    for site in sites:
        site.module.skip_embed_dim_check = True
    try:
        yield
    finally:
        for site, flag in zip(sites, saved):
            site.module.skip_embed_dim_check = flag or site.num_heads != site.total_heads


class RoutedConfig:
    """A view of the model's config that differs only in the attention implementation, so one
    layer uses ``implementation`` (``UNEVEN_GQA``, or kv.selective's) while the rest of the model
    (and its masks) keep the model's own."""

    def __init__(self, base, implementation: str = UNEVEN_GQA):
        object.__setattr__(self, "_base", base)
        object.__setattr__(self, "_implementation", implementation)

    def __getattr__(self, name):
        if name in ("_base", "_implementation"):
            raise AttributeError(name)
        return getattr(self._base, name)

    @property
    def _attn_implementation(self) -> str:
        return self._implementation


def _uneven_attention(module: nn.Module, query, key, value, attention_mask, **kwargs):
    """Attention for a layer whose query heads are spread unevenly over its KV heads.

    query ``[batch, n_query, q_len, head_dim]``; key, value ``[batch, n_kv, kv_len, head_dim]``.
    """
    index = getattr(module, _KV_INDEX_ATTR).to(key.device)
    key, value = key.index_select(1, index), value.index_select(1, index)
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    family_eager = sys.modules[type(module).__module__].eager_attention_forward
    inner = ALL_ATTENTION_FUNCTIONS.get_interface(module.config._base._attn_implementation, family_eager)
    return inner(module, query, key, value, attention_mask, **kwargs)


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if UNEVEN_GQA not in ALL_ATTENTION_FUNCTIONS:
        AttentionInterface.register(UNEVEN_GQA, _uneven_attention)


def _route_query_heads(site: AttentionSite) -> None:
    """Point each stored query head of a (pruned) GQA layer at its stored key/value head."""
    module, heads, groups = site.module, site.heads, site.kv_groups
    per_group = {sum(site.kv_group(h) == g for h in heads) for g in groups}
    if len(per_group) <= 1:  # even (or empty): repeat_kv with that count is exact
        module.num_key_value_groups = per_group.pop() if per_group else site.group_size
        if isinstance(module.config, RoutedConfig):
            module.config = module.config._base
        if hasattr(module, _KV_INDEX_ATTR):
            delattr(module, _KV_INDEX_ATTR)
        return
    _register()
    position = {g: i for i, g in enumerate(groups)}
    device = site.query.weight.device
    setattr(module, _KV_INDEX_ATTR, torch.tensor([position[site.kv_group(h)] for h in heads], device=device))
    module.num_key_value_groups = 1
    if not isinstance(module.config, RoutedConfig):
        module.config = RoutedConfig(module.config)


FAMILIES = {
    "bert": Family(_bert_sites, _count_bert, _empty_bert),
    "distilbert": Family(_distilbert_sites, _count_distilbert, _empty_distilbert),
    "bart": Family(_bart_sites, _count_bart, _empty_bart),
    "gpt2": Family(_gpt2_sites, _count_gpt2, _empty_gpt2),
    "llama": Family(_llama_sites, _count_llama, _empty_llama),
    "fairseq": Family(_fairseq_sites, _count_fairseq, _empty_fairseq, gate_switch=_fairseq_gate_switch),
}
