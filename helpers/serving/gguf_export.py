"""Write a (pruned) Llama-family model to a GGUF file that llama.cpp loads.

llama.cpp's ``llama`` architecture sizes every layer like layer 0, so it refuses a model whose
layers kept different numbers of heads. Its ``deci`` architecture (written for NVIDIA's
Nemotron models) reads ``attention.head_count`` and ``attention.head_count_kv`` as one number
per layer, computes the rest of a layer as ``llama`` does, and accepts a layer with no heads.
So an unevenly pruned model is written as ``deci``:

* per layer, the kept query heads and the kept KV groups (``kept_head_counts``); a layer with no
  head left has no attention tensors and caches nothing;
* query and key rows permuted per head from transformers' rotary layout (halves) to
  llama.cpp's (interleaved pairs), as llama.cpp's own converter does for ``llama``;
* tied input and output embeddings written once (llama.cpp reuses ``token_embd``);
* the tokenizer copied from a GGUF file of the source model (SmolLM2 ships as one).

llama.cpp maps query head ``h`` of a layer to KV head ``h // (n_head / n_head_kv)``, so every
kept KV group must keep the same number of query heads. A layer pruned by query heads may not
(two heads of group 0, one of group 1). ``pad_uneven=True`` fills each group up to the largest
with zero query heads (zero query rows and zero W_o columns): the output is unchanged, the
cache is unchanged, the padding costs its attention FLOPs. Without it such a layer raises
``GgufExportError``. So does a first layer with no head left (llama.cpp derives the head size
from layer 0), unless padded the same way: one zero query head over one zero KV head.

    report = export_gguf(model, "pruned.gguf", tokenizer_gguf=smollm2_gguf(), dtype="f16")
    report.padded_heads, report.kv_heads      # what was added, what llama.cpp will cache

The ``gguf`` package is imported only here, when a file is written.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..base.atomic import atomic_path
from ..heads.sites import AttentionSite, UnsupportedModelError, attention_sites

_ARCHITECTURE = "deci"
_EXPORTABLE_TYPES = ("llama", "mistral")
DTYPES = ("f32", "f16", "q8_0", "q4_0")  # the weight matrices' types; norms stay float32
_BLOCK_NUMBERS = 32  # numbers a q8_0 or q4_0 block holds (one scale each)
_WEIGHT_BYTES = {"f32": (1, 4), "f16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18)}  # (numbers, bytes) a block
# the tied embedding and output matrix in a q4_0 file: llama.cpp's quantize tool would choose Q6_K
# for the output matrix, which gguf cannot write in numpy; Q8_0 is the next type up it can
_EMBEDDING_TYPE = {"f32": "f32", "f16": "f16", "q8_0": "q8_0", "q4_0": "q8_0"}


class GgufExportError(ValueError):
    """The model (or a layer of it) cannot be written in a form llama.cpp computes exactly."""


@dataclass
class _LayerPlan:
    """One layer as it is written: ``rows``, per written query head, the stored head it copies
    (None: a zero head); ``kv_rows``, per written KV head, the stored KV head (None: zero)."""

    query_rows: list[int | None]
    kv_rows: list[int | None]

    @property
    def heads(self) -> int:
        return len(self.query_rows)

    @property
    def kv_heads(self) -> int:
        return len(self.kv_rows)


@dataclass
class GgufExport:
    """What ``export_gguf`` wrote: the file, its size in bytes, per layer the query and KV heads
    written, and the zero heads added to make layers representable."""

    path: Path
    file_bytes: int
    dtype: str
    heads: list[int] = field(default_factory=list)
    kv_heads: list[int] = field(default_factory=list)
    padded_heads: int = 0
    tensors: list[tuple[str, tuple[int, ...], str]] = field(default_factory=list)  # (name, shape, type)
    head_dim: int = 0  # numbers per head, as written (``attention.key_length``)

    @property
    def predicted_weight_bytes(self) -> int:
        """Every tensor's bytes by the arithmetic of its type (``_WEIGHT_BYTES``): what llama.cpp's
        ``llama_model_size`` should report for this file."""
        return sum(tensor_bytes(shape, kind) for _, shape, kind in self.tensors)


def tensor_bytes(shape: Sequence[int], kind: str) -> int:
    """Bytes of a tensor of ``shape`` (rows last: ``[..., row]``) in ``kind`` (``_WEIGHT_BYTES``)."""
    numbers, nbytes = _WEIGHT_BYTES[kind]
    return int(np.prod(shape)) // numbers * nbytes


def layer_plan(site: AttentionSite, pad_uneven: bool = False, first: bool = False) -> _LayerPlan:
    """How ``site``'s stored query and KV heads are written for llama.cpp (see the module doc)."""
    groups = site.kv_groups
    members = {g: [i for i, h in enumerate(site.heads) if site.kv_group(h) == g] for g in groups}
    counts = sorted({len(m) for m in members.values()})
    if not site.heads:
        if not first:
            return _LayerPlan([], [])
        if not pad_uneven:
            raise GgufExportError(
                f"layer {site.layer} has no head left and is the first layer: llama.cpp reads the head size from "
                "layer 0. Pass pad_uneven=True to write it as one zero query head over one zero KV head "
                "(exact; it caches one KV head), or keep a head in layer 0"
            )
        return _LayerPlan([None], [None])
    if len(counts) > 1 and not pad_uneven:
        shown = ", ".join(f"group {g}: {len(m)}" for g, m in members.items())
        raise GgufExportError(
            f"layer {site.layer} keeps query heads unevenly over its KV groups ({shown}); llama.cpp gives every "
            "KV head of a layer the same number of query heads. Pass pad_uneven=True to fill each group with "
            "zero query heads up to the largest (exact; costs their attention FLOPs, not cache), or prune whole "
            "KV groups (prune_kv_groups)"
        )
    stored_kv = site.key.weight.shape[0] // site.head_dim
    if stored_kv != len(groups):  # pruning drops a group's key and value rows with its last head
        raise GgufExportError(f"layer {site.layer} stores {stored_kv} key heads for {len(groups)} kept KV groups")
    width = counts[-1]
    rows: list[int | None] = []
    for g in groups:
        rows += members[g] + [None] * (width - len(members[g]))
    return _LayerPlan(rows, list(range(len(groups))))


def _rotary_interleave(rows: torch.Tensor, heads: int) -> torch.Tensor:
    """``[heads * head_dim, in]`` from transformers' rotary layout (first half, second half of
    each head) to llama.cpp's (pairs side by side)."""
    d = rows.shape[0] // heads
    return rows.reshape(heads, 2, d // 2, *rows.shape[1:]).transpose(1, 2).reshape(rows.shape)


def _pick_heads(weight: torch.Tensor, picks: Sequence[int | None], head_dim: int, dim: int) -> torch.Tensor:
    """Rows (``dim=0``) or columns (``dim=1``) of the stored heads ``picks`` (at least one), zeros for None."""
    zeros = list(weight.shape)
    zeros[dim] = head_dim
    return torch.cat(
        [weight.new_zeros(zeros) if p is None else weight.narrow(dim, p * head_dim, head_dim) for p in picks], dim
    )


def _check_exportable(model: nn.Module) -> None:
    config = model.config
    kind = getattr(config, "model_type", None)
    problems = []
    if kind not in _EXPORTABLE_TYPES:
        problems.append(f"model_type {kind!r} (exportable: {', '.join(_EXPORTABLE_TYPES)})")
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        problems.append("attention or MLP biases")
    if getattr(config, "sliding_window", None):
        problems.append(f"a sliding window of {config.sliding_window}")
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", "default") != "default":
        problems.append(f"rope_type {rope.get('rope_type')!r}")
    if getattr(config, "hidden_act", "silu") != "silu":
        problems.append(f"hidden_act {config.hidden_act!r}")
    if problems:
        raise UnsupportedModelError(
            f"{type(model).__name__} cannot be written as llama.cpp's {_ARCHITECTURE!r} architecture: "
            + "; ".join(problems)
            + ". An unpruned model of another family converts with llama.cpp's own "
            "convert_hf_to_gguf.py; a pruned one needs per-layer head counts, which only 'deci' reads here"
        )


def export_gguf(
    model: nn.Module,
    path: str | os.PathLike,
    *,
    tokenizer_gguf: str | os.PathLike,
    dtype: str = "f32",
    pad_uneven: bool = False,
    name: str = "pruned",
) -> GgufExport:
    """Write ``model`` (a transformers Llama or Mistral, pruned by this library or not) to ``path``.

    Args:
        dtype: the weight matrices' type: ``"f32"``, ``"f16"``, or llama.cpp's blocks of 32
            numbers with one scale, ``"q8_0"`` (8 bits a number) or ``"q4_0"`` (4 bits; the tied
            embedding is then ``q8_0``, ``_EMBEDDING_TYPE``). Norms stay float32, as llama.cpp expects.
        tokenizer_gguf: a GGUF file of the source model whose ``tokenizer.*`` fields are copied
            (llama.cpp loads no file without a vocabulary). SmolLM2 ships as one
            (``helpers.zoo.shipped.smollm2_gguf``); for a hub model, convert the unpruned model
            once with llama.cpp's ``convert_hf_to_gguf.py`` and pass that file.
        pad_uneven: write uneven layers with zero query heads (module doc) instead of raising.
    Returns:
        a ``GgufExport`` (written atomically: an interrupted export leaves no file).
    Raises:
        UnsupportedModelError: a family or setting llama.cpp's ``deci`` does not compute.
        GgufExportError: a layer llama.cpp cannot hold, when ``pad_uneven`` is False.
    """
    import gguf

    if dtype not in DTYPES:
        raise ValueError(f"unknown weight type {dtype!r}: choose one of {', '.join(DTYPES)}")
    _check_exportable(model)
    config = model.config
    sites = [s for s in attention_sites(model) if s.kind == "self"]
    plans = [layer_plan(s, pad_uneven, first=i == 0) for i, s in enumerate(sites)]
    head_dim = sites[0].head_dim
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        writer = gguf.GGUFWriter(str(tmp), _ARCHITECTURE)
        _write_header(writer, config, plans=plans, head_dim=head_dim, dtype=dtype, name=name)
        _copy_tokenizer(writer, Path(tokenizer_gguf))
        tensors = _TensorWriter(writer, dtype)
        _write_tensors(tensors, model, sites=sites, plans=plans, head_dim=head_dim)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.chmod(tmp, 0o644)  # readable like any file the build writes (the temporary file is private)
    padded = sum(p.query_rows.count(None) for p in plans)
    return GgufExport(
        path,
        path.stat().st_size,
        dtype,
        [p.heads for p in plans],
        [p.kv_heads for p in plans],
        padded,
        tensors.written,
        head_dim,
    )


def _write_header(writer, config, *, plans: list[_LayerPlan], head_dim: int, dtype: str, name: str) -> None:
    import gguf

    rope = getattr(config, "rope_parameters", None) or {}
    writer.add_name(name)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count([p.heads for p in plans])
    writer.add_head_count_kv([p.kv_heads for p in plans])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_vocab_size(config.vocab_size)
    file_types = {"f32": "ALL_F32", "f16": "MOSTLY_F16", "q8_0": "MOSTLY_Q8_0", "q4_0": "MOSTLY_Q4_0"}
    writer.add_file_type(getattr(gguf.LlamaFileType, file_types[dtype]))


def _copy_tokenizer(writer, source: Path) -> None:
    if not source.exists():
        raise FileNotFoundError(f"tokenizer_gguf {source} does not exist")
    stat = source.stat()
    fields = _tokenizer_fields(str(source.resolve()), stat.st_size, stat.st_mtime_ns)
    if not fields:
        raise ValueError(f"{source} holds no tokenizer.* fields to copy")
    for key, value, kind, sub in fields:
        writer.add_key_value(key, value, kind, sub_type=sub)


@functools.lru_cache(maxsize=4)
def _tokenizer_fields(source: str, size: int, mtime_ns: int) -> tuple:
    """``(key, value, type, array type)`` of every ``tokenizer.*`` field of ``source``, read once
    per file version (opening a GGUF file parses it whole: seconds for SmolLM2's)."""
    import gguf

    out = []
    for key, f in gguf.GGUFReader(source).fields.items():
        if key.startswith("tokenizer."):
            kind = f.types[0]
            out.append((key, f.contents(), kind, f.types[-1] if kind == gguf.GGUFValueType.ARRAY else None))
    return tuple(out)


class _TensorWriter:
    """Adds tensors to a ``GGUFWriter`` in one weight type (norms in float32, the embedding in
    ``_EMBEDDING_TYPE``), and lists what it wrote."""

    def __init__(self, writer, dtype: str):
        self.writer, self.dtype = writer, dtype
        self.written: list[tuple[str, tuple[int, ...], str]] = []

    def add(self, name: str, t: torch.Tensor, kind: str | None = None) -> None:
        import gguf

        kind = kind or self.dtype
        array = t.detach().to(torch.float32).cpu().numpy()
        if kind in ("f32", "f16"):
            self.writer.add_tensor(name, array.astype(np.float32 if kind == "f32" else np.float16, copy=False))
        else:
            if array.shape[-1] % _BLOCK_NUMBERS:
                raise GgufExportError(
                    f"{name} has rows of {array.shape[-1]} numbers: {kind} stores blocks of {_BLOCK_NUMBERS}; "
                    "write this model in f16 or f32"
                )
            qtype = getattr(gguf.GGMLQuantizationType, kind.upper())
            self.writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
        self.written.append((name, tuple(array.shape), kind))

    def norm(self, name: str, t: torch.Tensor) -> None:
        self.add(name, t, "f32")


def _write_tensors(
    out: _TensorWriter, model, *, sites: list[AttentionSite], plans: list[_LayerPlan], head_dim: int
) -> None:
    base = model.model
    embed = base.embed_tokens.weight
    out.add("token_embd.weight", embed, _EMBEDDING_TYPE[out.dtype])
    out.norm("output_norm.weight", base.norm.weight)
    head = model.get_output_embeddings().weight
    if head.data_ptr() != embed.data_ptr():
        out.add("output.weight", head, _EMBEDDING_TYPE[out.dtype])
    for i, (layer, site, plan) in enumerate(zip(base.layers, sites, plans, strict=True)):
        blk = f"blk.{i}"
        if plan.heads:  # a layer with no head has no attention norm either (llama.cpp skips both)
            out.norm(f"{blk}.attn_norm.weight", layer.input_layernorm.weight)
            q = _pick_heads(site.query.weight, plan.query_rows, head_dim, 0)
            k = _pick_heads(site.key.weight, plan.kv_rows, head_dim, 0)
            v = _pick_heads(site.value.weight, plan.kv_rows, head_dim, 0)
            o = _pick_heads(site.output.weight, plan.query_rows, head_dim, 1)
            out.add(f"{blk}.attn_q.weight", _rotary_interleave(q, plan.heads))
            out.add(f"{blk}.attn_k.weight", _rotary_interleave(k, plan.kv_heads))
            out.add(f"{blk}.attn_v.weight", v)
            out.add(f"{blk}.attn_output.weight", o)
        out.norm(f"{blk}.ffn_norm.weight", layer.post_attention_layernorm.weight)
        out.add(f"{blk}.ffn_gate.weight", layer.mlp.gate_proj.weight)
        out.add(f"{blk}.ffn_up.weight", layer.mlp.up_proj.weight)
        out.add(f"{blk}.ffn_down.weight", layer.mlp.down_proj.weight)
