"""Many head configurations in one pass: repeat a batch once per configuration, gate each copy.

A sweep over K configurations of a batch of B examples can run K passes of B rows, or one pass
of K * B rows in which rows ``[k * B, (k + 1) * B)`` carry configuration k's gates
(``HeadGates.rows``). Each row sees exactly the computation it would see alone, so the outputs
are those of one configuration at a time; the pass amortises per-call overhead (Python, kernel
launches, fairseq's per-step bookkeeping in beam search) over K configurations.

* ``config_row_gates``: the row gates of K configurations for copies of B rows;
* ``repeat_rows``: a batch (tensors, dicts, lists, tuples) repeated K times along its batch axis;
* ``fairseq_rows``: keeps row gates aligned while fairseq's beam search reorders and drops rows,
  and computes the encoder once per batch when no configuration gates it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ..heads.gates import HeadGates, HeadSpec
from ..heads.sites import HeadSpecError, resolve

Config = tuple[str, int, tuple[int, ...]]  # (kind, layer, heads masked), 0-based
UNMASKED: Config = ("none", -1, ())  # the configuration that masks nothing
_ENCODER_KINDS = ("self", "enc_self")


def config_row_gates(
    gates: HeadGates, configs: Sequence[Config | HeadSpec], rows_each: int
) -> dict[str, torch.Tensor]:
    """Row gates for ``len(configs)`` copies of a batch of ``rows_each`` examples: copy k (rows
    ``[k * rows_each, (k + 1) * rows_each)``) masks the heads of ``configs[k]``, a ``Config``
    or a head spec ``{kind: {layer: [head, ...]}}`` (e.g. a step of a pruning curve).

    Returns ``{kind: [len(configs) * rows_each, n_layers, n_heads]}`` for the kinds the configurations
    touch (an unmasked configuration, kind ``"none"``, is a copy of ones)."""
    out: dict[str, torch.Tensor] = {}
    for k, config in enumerate(configs):
        for kind, layers in as_spec(config).items():
            if kind not in out:
                out[kind] = torch.ones(len(configs), *gates.tensor(kind).shape, device=gates.tensor(kind).device)
            for layer, heads in layers.items():
                site = resolve(gates.sites, kind, layer)
                for h in heads:
                    if h not in site.heads:
                        raise HeadSpecError(f"{kind} layer {layer} has no head {h} (heads present: {site.heads})")
                    out[kind][k, layer, h] = 0.0
    return {kind: g.repeat_interleave(rows_each, dim=0) for kind, g in out.items()}


def as_spec(config: Config | HeadSpec) -> HeadSpec:
    """A ``Config`` ``(kind, layer, heads)`` as the head spec ``{kind: {layer: heads}}`` ({} if it
    masks nothing); a head spec as it is."""
    if isinstance(config, Mapping):
        return config
    kind, layer, heads = config
    return {kind: {layer: list(heads)}} if heads else {}


def repeat_rows(batch: Any, copies: int, dim: int = 0) -> Any:
    """``batch`` with every tensor repeated ``copies`` times along ``dim`` (copy-major: rows of
    copy k follow those of copy k-1); dicts, lists and tuples are walked, anything else is kept."""
    if copies == 1:
        return batch
    if isinstance(batch, torch.Tensor):
        if batch.dim() <= dim:
            return batch
        reps = [1] * batch.dim()
        reps[dim] = copies
        return batch.repeat(*reps)
    if isinstance(batch, Mapping):  # dicts and transformers' BatchEncoding
        return {k: repeat_rows(v, copies, dim) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(repeat_rows(v, copies, dim) for v in batch)
    return batch


@contextmanager
def fairseq_rows(model: nn.Module, gates: HeadGates, copies: int, encoder_shared: bool) -> Iterator[None]:
    """While fairseq's ``SequenceGenerator`` decodes ``copies`` copies of a batch, keep ``gates``'
    row gates aligned with its rows: it reorders (beams) and drops (finished sentences) rows
    through ``model.encoder.reorder_encoder_out``, which this wraps. With ``encoder_shared``
    (no configuration gates an encoder head) the encoder runs on the first copy only and its
    output is repeated, which gives the same tensors at a ``copies``-th of the cost."""
    encoder = model.encoder
    original_reorder = encoder.reorder_encoder_out

    def reorder(encoder_out, new_order):
        gates.reorder_rows(new_order)
        return original_reorder(encoder_out, new_order)

    def shared_forward(src_tokens, src_lengths=None, **kwargs):
        rows = src_tokens.shape[0] // copies
        out = type(encoder).forward(
            encoder, src_tokens[:rows], None if src_lengths is None else src_lengths[:rows], **kwargs
        )
        return original_reorder(out, torch.arange(rows, device=src_tokens.device).repeat(copies))

    encoder.reorder_encoder_out = reorder
    if encoder_shared and copies > 1:
        encoder.forward = shared_forward
    try:
        yield
    finally:
        del encoder.reorder_encoder_out
        if "forward" in vars(encoder):
            del encoder.forward


def gates_encoder(configs: Sequence[Config | HeadSpec]) -> bool:
    """Whether any configuration (``Config`` or head spec) masks a head of an encoder kind."""
    return any(kind in _ENCODER_KINDS and any(layers.values()) for c in configs for kind, layers in as_spec(c).items())
