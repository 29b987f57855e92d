"""Per-head gates xi_h (paper §2.3): MHAtt(x, q) = sum_h xi_h * Att_h(x, q).

A forward pre-hook on each block's output projection W_o scales the context vector of head h
(the slice ``[h * head_dim, (h + 1) * head_dim)`` of W_o's input) by xi_h. W_o's bias is shared
by all heads and is left alone, as in the authors' code. The same hook serves every family,
without touching model code.

Gates of ones are exact: while a kind's gates are all ones and do not require grad the hook
leaves its input untouched, so outputs are bit-identical to the model without gates. (For
fairseq this also keeps its fused attention kernel; any other gate value sends fairseq down its
explicit attention path, the one it uses itself for pruned heads, so the hook can act.)

Under ``torch.compile`` the hooks are traced with the model: there every layer is gated (by
ones where nothing is masked), and the compiled graph reads the gate tensors at each call, so
it follows later edits of the gates without recompiling.

Row gates (``HeadGates.rows``) give each example of a batch its own gates, so that one forward
pass, or one beam search, evaluates many head configurations: repeat the batch once per
configuration and give each copy that configuration's gates. They multiply the shared gates.

``HeadGates(model, removal=...)`` removes a head by putting another output in its place instead
of zero (mean or resample ablation, removal.py): a gate g then gives ``g * c + (1 - g) * r``.

The pieces: ``gate_heads`` is the arithmetic (a pure function); ``RowGates`` holds per-example
gates; ``HeadGates`` installs the hooks, keeps the gate tensors and records what W_o saw. What each
family needs (fairseq's kernel switch) comes from the family table (``sites.FAMILIES``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from ..base.devices import device_of
from .removal import HeadRemoval
from .sites import FAMILIES, AttentionSite, HeadSpecError, attention_sites, check_head, resolve, sites_by_kind

HeadSpec = Mapping[str, Mapping[int, Sequence[int]]]
"""``{kind: {layer: [head, ...]}}`` with 0-based layers and original head indices."""
Head = tuple[str, int, int]
"""One head, ``(kind, layer, head)``: an element of a ``HeadSpec``, and what orders of heads
(least important first, ...) are lists of."""


def heads_of(model: nn.Module, kinds: Sequence[str] | None = None) -> list[Head]:
    """Every head of ``model`` (of ``kinds`` only, if given) as ``Head`` tuples, in (kind, layer,
    head) order."""
    return [(s.kind, s.layer, h) for s in attention_sites(model) if kinds is None or s.kind in kinds for h in s.heads]


def spec_of(heads: Sequence[Head]) -> dict[str, dict[int, list[int]]]:
    """The ``HeadSpec`` of ``heads`` (``Head`` tuples), for ``HeadGates.mask`` or ``prune_heads``."""
    spec: dict[str, dict[int, list[int]]] = {}
    for kind, layer, head in heads:
        spec.setdefault(kind, {}).setdefault(layer, []).append(head)
    return spec


def heads_in(spec: HeadSpec) -> frozenset:
    """The set of ``(kind, layer, head)`` a head spec masks: equal for specs that mask the same heads."""
    return frozenset(
        (kind, int(layer), int(h)) for kind, layers in spec.items() for layer, heads in layers.items() for h in heads
    )


def gate_heads(
    context: torch.Tensor, gates: torch.Tensor, head_dim: int, replacement: torch.Tensor | None = None
) -> torch.Tensor:
    """xi_h * Att_h(x) for every head at once (paper Eq. 1, §2.3): W_o's input with head h's
    slice scaled by its gate.

    context: W_o's input ``[..., heads * head_dim]``, the heads' context vectors side by side;
    gates: ``[heads, 1]``, or with leading axes that broadcast over ``context``'s (row gates);
    replacement: None (a closed gate zeroes its head: the paper's mask), or ``[..., heads,
    head_dim]``, what a closed gate puts in the head's place (mean or resample ablation).
    Returns a tensor of ``context``'s shape and dtype."""
    shape = context.shape  # [..., H * d]
    per_head = context.reshape(*shape[:-1], -1, head_dim)  # [..., H, d]: one row per head
    if replacement is None:
        gated = per_head * gates  # [..., H, d] * [..., H, 1]
    else:
        gated = per_head * gates + (1 - gates) * replacement  # g * c + (1 - g) * r
    return gated.reshape(shape)  # [..., H * d], as W_o reads it


class RowGates:
    """Per-example gates: row ``r`` of every batch gated by ``gates[kind][r]`` as well
    (``[rows, n_layers, n_heads]`` per kind, kinds left out: ones). ``period``: the rows of one
    copy of a repeated batch (resample ablation gives row ``r`` the donor of row ``r mod period``)."""

    def __init__(self, gates: Mapping[str, torch.Tensor], period: int | None = None):
        self.gates = dict(gates)
        self.period = period
        self._refresh()

    def reorder(self, new_order: torch.Tensor) -> None:
        """Row ``i`` becomes the old row ``new_order[i]`` (a beam search's reordering)."""
        self.gates = {k: g.index_select(0, new_order.to(g.device)) for k, g in self.gates.items()}
        self._refresh()

    def _refresh(self) -> None:
        # per kind and layer: does some row gate differ from one (else the layer needs no gating)
        self._gated = {k: (g != 1.0).any(dim=2).any(dim=0).tolist() for k, g in self.gates.items()}

    def gate_layer(self, site: AttentionSite) -> bool:
        return site.kind in self._gated and self._gated[site.kind][site.layer]

    def for_site(self, site: AttentionSite, shape: torch.Size, kept: torch.Tensor) -> torch.Tensor:
        """This site's row gates for its ``kept`` heads, shaped to broadcast over W_o's input
        (``shape``) viewed as ``[..., heads, head_dim]``."""
        rows = self.gates[site.kind][:, site.layer].index_select(1, kept)  # [rows, heads]
        if shape[site.batch_dim] != rows.shape[0]:
            raise HeadSpecError(
                f"{site.kind} layer {site.layer} got a batch of {shape[site.batch_dim]} examples "
                f"but the row gates have {rows.shape[0]} rows; repeat the batch once per configuration"
            )
        view = [1] * (len(shape) - 1) + [rows.shape[1], 1]
        view[site.batch_dim] = rows.shape[0]
        return rows.reshape(view)  # [1.., rows on the batch dim, 1.., heads, 1]: broadcasts over [..., H, d]


@dataclass
class GateRecord:
    """What one gated call of W_o saw, kept while recording (for importance.py).

    ``context``: W_o's input before gating, detached, shape ``[..., num_heads * head_dim]``.
    ``gated``: the gated input that W_o consumed (part of the autograd graph).
    """

    site: AttentionSite
    context: torch.Tensor
    gated: torch.Tensor


class HeadGates:
    """Context manager that installs one gate per head and removes every hook on exit.

    ``gates.tensor(kind)`` is a leaf tensor ``[n_layers, n_heads]`` (float32, on the model's
    device), initialised to ones, indexed by *original* head numbers: after pruning, the
    columns of removed heads have no effect. Edit it in place (under ``torch.no_grad()`` if it
    requires grad)::

        with HeadGates(model) as gates:
            gates.tensor("self")[3, 7] = 0.0     # mask head 7 of layer 3
            logits = model(**batch).logits

    What it changes on the model, and only while installed: a forward pre-hook on every block's
    W_o (and, on fairseq blocks, one on the block that switches its fused kernel off while gates
    act). Hooks are state of the model, not of this object: two ``HeadGates`` installed on one
    model at once multiply their gates. Leaving the ``with`` block removes every hook and
    restores fairseq's kernel flag; nothing else is touched (pruning, not gating, rebinds
    forwards: ``prune_heads``).
    """

    def __init__(self, model: nn.Module, *, requires_grad: bool = False, removal: HeadRemoval | None = None):
        self.model = model
        self.removal = None if removal is None or removal.zero else removal
        self.sites = attention_sites(model)
        device = device_of(model)
        self._tensors: dict[str, torch.Tensor] = {}
        for kind, group in sites_by_kind(self.sites).items():
            n_heads = max(s.total_heads for s in group)
            with torch.inference_mode(False):  # a normal tensor even when made under inference_mode:
                t = torch.ones(len(group), n_heads, device=device)  # the hook reads its version counter
            self._tensors[kind] = t.requires_grad_(requires_grad)
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._identity_cache: dict[str, tuple[int, list[bool]]] = {}  # kind -> (version, row is all ones)
        self._index_cache: dict[int, tuple[tuple[int, ...], torch.Tensor]] = {}
        self._gate_cache: dict[int, tuple[tuple, torch.Tensor]] = {}  # site -> (key, gates [heads, 1])
        self._records: list[GateRecord] | None = None
        self._undo: list[Callable[[], None]] = []  # the families' switches, undone on exit
        self._rows: RowGates | None = None

    # ---- public API ------------------------------------------------------------------
    @property
    def kinds(self) -> list[str]:
        return list(self._tensors)

    @property
    def active(self) -> bool:
        return bool(self._handles)

    def tensor(self, kind: str) -> torch.Tensor:
        """The gate tensor of ``kind``: ``[n_layers, n_heads]``, a leaf that can require grad."""
        if kind not in self._tensors:
            raise HeadSpecError(f"unknown attention kind {kind!r}; this model has kinds {self.kinds}")
        return self._tensors[kind]

    @torch.no_grad()
    def reset(self) -> None:
        """Set every gate back to one."""
        for t in self._tensors.values():
            t.fill_(1.0)

    @torch.no_grad()
    def mask(self, heads: HeadSpec, value: float = 0.0) -> None:
        """Set the gates of ``heads`` (``{kind: {layer: [head, ...]}}``) to ``value``."""
        for kind, layers in heads.items():
            for layer, hs in layers.items():
                site = resolve(self.sites, kind, layer)
                for h in hs:
                    check_head(site, h)
                    self._tensors[kind][layer, h] = value

    @contextmanager
    def rows(self, gates: Mapping[str, torch.Tensor], period: int | None = None) -> Iterator[None]:
        """Within this block, row ``r`` of every batch is gated by ``gates[kind][r]`` as well.

        ``gates``: ``{kind: [rows, n_layers, n_heads]}`` (kinds left out: ones), indexed like
        ``tensor(kind)``; every batch a gated block sees must have exactly ``rows`` examples.
        Beam search reorders and drops rows as it goes: call ``reorder_rows`` with its order.
        ``period``: the rows of one copy of a repeated batch, so that resample ablation gives row
        ``r`` the donor of row ``r mod period`` under every configuration.
        """
        if not self.active:
            raise RuntimeError("HeadGates.rows() needs the gates installed: use it inside `with HeadGates(model)`")
        if self._rows is not None:
            raise RuntimeError("row gates are already set; HeadGates.rows() blocks do not nest")
        n_rows = set()
        for kind, g in gates.items():
            expected = tuple(self.tensor(kind).shape)
            if g.dim() != 3 or tuple(g.shape[1:]) != expected:
                raise HeadSpecError(
                    f"row gates of {kind!r} have shape {tuple(g.shape)}; "
                    f"expected [rows, {expected[0]}, {expected[1]}] (rows x layers x heads)"
                )
            n_rows.add(g.shape[0])
        if len(n_rows) > 1:
            raise HeadSpecError(f"row gates of different kinds have different numbers of rows: {sorted(n_rows)}")
        self._rows = RowGates({k: g.detach().to(self.tensor(k).device) for k, g in gates.items()}, period)
        try:
            yield
        finally:
            self._rows = None

    def reorder_rows(self, new_order: torch.Tensor) -> None:
        """Row ``i`` becomes the old row ``new_order[i]`` (fairseq's ``reorder_encoder_out`` order)."""
        if self._rows is not None:
            self._rows.reorder(new_order)

    @contextmanager
    def recording(self) -> Iterator[list[GateRecord]]:
        """Within this block every gated W_o call is recorded (and gated even at ones)."""
        if not self.active:
            raise RuntimeError(
                "HeadGates.recording() needs the gates installed: use it inside `with HeadGates(model)`"
            )
        self._records = []
        try:
            yield self._records
        finally:
            self._records = None

    # ---- context manager -------------------------------------------------------------
    def __enter__(self) -> HeadGates:
        if self.active:
            raise RuntimeError("these HeadGates are already installed")
        for site in self.sites:
            self._handles.append(site.output.register_forward_pre_hook(self._make_hook(site)))
            switch = FAMILIES[site.family].gate_switch
            if switch is not None:
                self._undo.append(switch(site, lambda site=site: self._must_gate(site)))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        for undo in self._undo:
            undo()
        self._undo.clear()

    # ---- hooks -------------------------------------------------------------------------
    def _must_gate(self, site: AttentionSite) -> bool:
        """False when this site's gates are all ones and nothing records or differentiates them,
        so the site runs exactly as without gates (fairseq keeps its fused kernel), whatever
        the gates of other layers are."""
        if self._records is not None or torch.compiler.is_compiling():
            # compiled: gate every layer (a gate of one is exact), so that the traced graph reads
            # the gate tensors as inputs and follows their edits instead of specialising on them
            return True
        if self._rows is not None and self._rows.gate_layer(site):
            return True
        t = self._tensors[site.kind]
        if t.requires_grad:
            return True
        version, identity = self._identity_cache.get(site.kind, (-1, None))
        if version != t._version:  # in-place edits bump the version counter
            identity = torch.all(t == 1.0, dim=1).tolist()
            self._identity_cache[site.kind] = (t._version, identity)
        return not identity[site.layer]

    def _kept_index(self, site: AttentionSite) -> torch.Tensor:
        heads = tuple(site.heads)
        cached = self._index_cache.get(id(site))
        if cached is None or cached[0] != heads:
            cached = (heads, torch.tensor(heads, dtype=torch.long, device=self._tensors[site.kind].device))
            self._index_cache[id(site)] = cached
        return cached[1]

    def _site_gates(self, site: AttentionSite, dtype: torch.dtype) -> torch.Tensor:
        """The gates of ``site``'s kept heads as ``[heads, 1]`` in ``dtype``. Without grad they are
        cached until the gates change, so that a gated layer costs one multiplication and no
        extra kernel launches (what counts on a GPU at small batches)."""
        t = self._tensors[site.kind]
        if t.requires_grad or torch.compiler.is_compiling():
            return self._kept_gates(site, dtype)
        key = (t._version, tuple(site.heads), dtype)
        cached = self._gate_cache.get(id(site))
        if cached is None or cached[0] != key:
            cached = (key, self._kept_gates(site, dtype))
            self._gate_cache[id(site)] = cached
        return cached[1]

    def _kept_gates(self, site: AttentionSite, dtype: torch.dtype) -> torch.Tensor:
        return self._tensors[site.kind][site.layer].index_select(0, self._kept_index(site)).to(dtype)[:, None]

    def _make_hook(self, site: AttentionSite):
        def hook(module: nn.Module, args: tuple) -> tuple | None:
            if not self._must_gate(site) or site.num_heads == 0:
                return None
            (context,) = args  # W_o's input [..., H * d]
            gate = self._site_gates(site, context.dtype)  # [H, 1]
            if self._rows is not None and site.kind in self._rows.gates:
                gate = gate * self._rows.for_site(site, context.shape, self._kept_index(site)).to(context.dtype)
            replacement = None
            if self.removal is not None:
                per_head = context.reshape(*context.shape[:-1], site.num_heads, site.head_dim)  # [..., H, d]
                period = self._rows.period if self._rows is not None else None
                replacement = self.removal.replacement(site, per_head, period)
            gated = gate_heads(context, gate, site.head_dim, replacement)
            if self._records is not None:
                if not gated.requires_grad:
                    gated.requires_grad_()
                self._records.append(GateRecord(site, context.detach(), gated))
            return (gated,)

        return hook
