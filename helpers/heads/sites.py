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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

ENCODER_ONLY_KINDS = ("self",)
SEQ2SEQ_KINDS = ("enc_self", "enc_dec", "dec_self")

# model_type values (transformers' config.model_type) of the families tested in tests/.
BERT_LIKE_TYPES = ("bert", "roberta", "electra", "xlm-roberta")
DISTILBERT_TYPES = ("distilbert",)
BART_LIKE_TYPES = ("bart", "marian")
GPT2_TYPES = ("gpt2",)
LLAMA_LIKE_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text")

SUPPORTED_FAMILIES = (
    "transformers BERT-like encoders (model_type in "
    + ", ".join(BERT_LIKE_TYPES + DISTILBERT_TYPES)
    + "; MiniLM checkpoints are model_type 'bert'), "
    "transformers encoder-decoders (model_type in " + ", ".join(BART_LIKE_TYPES) + "), "
    "transformers decoder-only LMs (model_type in "
    + ", ".join(GPT2_TYPES + LLAMA_LIKE_TYPES)
    + "; grouped-query attention included), "
    "and fairseq's TransformerModel (fairseq.models.transformer)"
)

# Attributes this library keeps on each attention module.
_KEPT_ATTR = "_sixteen_heads_kept"
_TOTAL_ATTR = "_sixteen_heads_total"


class UnsupportedModelError(TypeError):
    """The model is not one of the families listed in ``SUPPORTED_FAMILIES``."""


class HeadSpecError(ValueError):
    """A head specification names an unknown kind, a layer or head out of range, or a pruned head."""


@dataclass(eq=False)
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


# --------------------------------------------------------------------------------------
# Family adapters. Each knows where the sites are, how to record a new head count after
# slicing, and what the block must return once it has no head left (only W_o's bias).
# --------------------------------------------------------------------------------------


def _bert_sites(model: nn.Module) -> list[AttentionSite]:
    layers = model.base_model.encoder.layer
    return [
        AttentionSite(
            "self",
            i,
            "bert",
            blk.attention.self,
            blk.attention.self.query,
            blk.attention.self.key,
            blk.attention.self.value,
            blk.attention.output.dense,
            blk.attention.self.attention_head_size,
            0,
        )
        for i, blk in enumerate(layers)
    ]


def _distilbert_sites(model: nn.Module) -> list[AttentionSite]:
    layers = model.base_model.transformer.layer
    return [
        AttentionSite(
            "self",
            i,
            "distilbert",
            blk.attention,
            blk.attention.q_lin,
            blk.attention.k_lin,
            blk.attention.v_lin,
            blk.attention.out_lin,
            blk.attention.attention_head_size,
            0,
        )
        for i, blk in enumerate(layers)
    ]


def _seq2seq_sites(encoder_layers, decoder_layers, family: str, batch_dim: int) -> list[AttentionSite]:
    def site(kind: str, i: int, attn: nn.Module) -> AttentionSite:
        return AttentionSite(
            kind,
            i,
            family,
            attn,
            attn.q_proj,
            attn.k_proj,
            attn.v_proj,
            attn.out_proj,
            attn.head_dim,
            batch_dim,
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
        AttentionSite(
            "self",
            i,
            "gpt2",
            blk.attn,
            blk.attn.c_attn,
            blk.attn.c_attn,
            blk.attn.c_attn,
            blk.attn.c_proj,
            blk.attn.head_dim,
            0,
            fused_qkv=True,
        )
        for i, blk in enumerate(model.base_model.h)
    ]


def _llama_sites(model: nn.Module) -> list[AttentionSite]:
    config = model.config
    group_size = config.num_attention_heads // config.num_key_value_heads
    return [
        AttentionSite(
            "self",
            i,
            "llama",
            blk.self_attn,
            blk.self_attn.q_proj,
            blk.self_attn.k_proj,
            blk.self_attn.v_proj,
            blk.self_attn.o_proj,
            blk.self_attn.head_dim,
            0,
            group_size=group_size,
        )
        for i, blk in enumerate(model.base_model.layers)
    ]


def _is_fairseq_transformer(model: nn.Module) -> bool:
    if not type(model).__module__.startswith("fairseq"):
        return False
    from fairseq.models.transformer import TransformerModelBase  # already imported: the model is one

    return isinstance(model, TransformerModelBase)


def _finder(model: nn.Module) -> Callable[[nn.Module], list[AttentionSite]]:
    if _is_fairseq_transformer(model):
        return _fairseq_sites
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type in BERT_LIKE_TYPES and not getattr(config, "is_decoder", False):
        return _bert_sites
    if model_type in DISTILBERT_TYPES:
        return _distilbert_sites
    if model_type in BART_LIKE_TYPES:
        return _bart_sites
    if model_type in GPT2_TYPES:
        if getattr(config, "add_cross_attention", False):
            raise UnsupportedModelError(
                "GPT-2 with cross-attention (add_cross_attention=True) is not supported; "
                f"helpers supports {SUPPORTED_FAMILIES}."
            )
        return _gpt2_sites
    if model_type in LLAMA_LIKE_TYPES:
        return _llama_sites
    raise UnsupportedModelError(
        f"{type(model).__name__} (model_type={model_type!r}) is not supported. helpers supports {SUPPORTED_FAMILIES}."
    )


def attention_sites(model: nn.Module) -> list[AttentionSite]:
    """Every attention block of ``model``, ordered by kind (encoder first) then layer.

    Raises:
        UnsupportedModelError: the model is not in one of the supported families.
    """
    order = {k: i for i, k in enumerate(ENCODER_ONLY_KINDS + SEQ2SEQ_KINDS)}
    return sorted(_finder(model)(model), key=lambda s: (order[s.kind], s.layer))


def family_of(model: nn.Module) -> str:
    """``"bert"``, ``"distilbert"``, ``"bart"``, ``"gpt2"``, ``"llama"`` or ``"fairseq"``."""
    return _finder(model)(model)[0].family


def sites_by_kind(sites: list[AttentionSite]) -> dict[str, list[AttentionSite]]:
    """Group sites by kind; within a kind, ``result[kind][layer]`` is that layer's site."""
    grouped: dict[str, list[AttentionSite]] = {}
    for s in sites:
        grouped.setdefault(s.kind, []).append(s)
    for group in grouped.values():
        group.sort(key=lambda s: s.layer)
    return grouped


def layout(model: nn.Module) -> dict[str, tuple[int, int]]:
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
