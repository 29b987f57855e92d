"""Three ways to remove a head: zero, mean and resample ablation.

``HeadGates`` multiplies head h's context vector by its gate xi_h, so a zero gate *zeroes* the
head's output (the paper's masking). Zero is not the only way to take a head out, and the choice
changes which heads look important (Zhang & Nanda 2024; Li & Janson 2024). With a ``HeadRemoval``
given to ``HeadGates(model, removal=...)`` a gate g mixes the head's own output c with a
replacement r::

    g * c + (1 - g) * r

so g = 1 keeps the head (bit-identical to no gates) and g = 0 puts r in its place:

* ``zero``: r = 0, today's gates exactly (the same code path);
* ``mean``: r is the head's mean output *per position* over a reference set. Per position and
  not over positions, because a head's output depends strongly on where it is (BERT's [CLS],
  the first token of a language model, on which many heads park their attention): a mean over
  positions would put the first token's output everywhere and remove more than the head's
  information about *this* input. Positions past the longest reference example take the mean
  over all reference positions;
* ``resample``: r is the head's output, position by position, on *another example*, taken from
  the reference set: row b of a batch takes reference example ``b mod R`` (the same donor under
  every configuration, so one-head effects stay paired). Where the donor is shorter than the
  row, the row's later positions take the per-position mean.

The reference set is given explicitly (``reference_outputs``): a few examples *not* in the
evaluation set, run one at a time so that no padding enters the means. Positions count from the
start of each row, so evaluation batches must be right-padded (as every model in this project
is); padded positions get a replacement too, which is harmless because nothing attends to them.

These replacements need the whole sequence in one call: encoders, classifiers, teacher-forced
encoder-decoders and language-model scoring. Incremental decoding (beam search with a cache)
sees one position per call, which these replacements would take for the first position: it is
not supported (zero ablation has no positions and works everywhere).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .sites import AttentionSite, attention_sites

REMOVAL_KINDS = ("zero", "mean", "resample")


@dataclass
class HeadRemoval:
    """How a gate below one removes a head: ``kind`` in ``REMOVAL_KINDS``, and for ``mean`` and
    ``resample`` the reference outputs of every site (``reference_outputs``).

    ``means[(kind, layer)]``: ``[positions, heads, head_dim]``; ``overall[(kind, layer)]``:
    ``[heads, head_dim]``; ``examples[(kind, layer)]``: one ``[T_i, heads, head_dim]`` per
    reference example. Heads are those present when the reference was recorded.
    """

    kind: str = "zero"
    means: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)
    overall: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)
    examples: dict[tuple[str, int], list[torch.Tensor]] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in REMOVAL_KINDS:
            raise ValueError(f"unknown removal kind {self.kind!r}: choose one of {REMOVAL_KINDS}")
        if self.kind != "zero" and not self.means:
            raise ValueError(
                f"{self.kind} ablation needs a reference set: build the removal with "
                f"reference_outputs(model, examples, run, kind={self.kind!r})"
            )

    @property
    def zero(self) -> bool:
        return self.kind == "zero"

    def replacement(self, site: AttentionSite, per_head: torch.Tensor, period: int | None = None) -> torch.Tensor:
        """What replaces the heads of ``site`` in W_o's input ``per_head`` viewed as
        ``[..., heads, head_dim]`` (``[B, T, H, d]``, or ``[T, B, H, d]`` for fairseq), shaped to
        broadcast against it. ``period``: rows per copy of a repeated batch (resample donors
        repeat with it)."""
        key = (site.kind, site.layer)
        if key not in self.means:
            raise ValueError(
                f"the reference set has no outputs of {site.kind} layer {site.layer}; "
                "record it on this model with reference_outputs"
            )
        means = self.means[key]
        if means.shape[1:] != per_head.shape[-2:]:
            raise ValueError(
                f"{site.kind} layer {site.layer} has {per_head.shape[-2]} heads of size "
                f"{per_head.shape[-1]} but the reference was recorded with {means.shape[1]}: "
                "record the reference again after pruning"
            )
        time_dim = 1 - site.batch_dim if per_head.dim() == 4 else None
        length = per_head.shape[time_dim] if time_dim is not None else 1
        by_position = self._positions(key, length).to(per_head.device, per_head.dtype)  # [T, H, d]
        if self.kind == "mean":
            return by_position if site.batch_dim == 0 else by_position[:, None]
        rows = per_head.shape[site.batch_dim]
        donors = torch.stack(
            [self._donor(key, b % (period or rows), by_position) for b in range(rows)]
        )  # [B, T, H, d]
        donors = donors.to(per_head.device, per_head.dtype)
        return donors if site.batch_dim == 0 else donors.transpose(0, 1)

    def _positions(self, key: tuple[str, int], length: int) -> torch.Tensor:
        means = self.means[key]
        if length <= means.shape[0]:
            return means[:length]
        extra = self.overall[key].expand(length - means.shape[0], *means.shape[1:])
        return torch.cat([means, extra])

    def _donor(self, key: tuple[str, int], row: int, by_position: torch.Tensor) -> torch.Tensor:
        examples = self.examples[key]
        donor = examples[row % len(examples)].to(by_position.device)
        length = by_position.shape[0]
        if donor.shape[0] >= length:
            return donor[:length]
        return torch.cat([donor, by_position[donor.shape[0] :]])


def reference_outputs(
    model: nn.Module, examples: Iterable[Any], run: Callable[[nn.Module, Any], Any], kind: str = "mean"
) -> HeadRemoval:
    """Record every head's output on ``examples`` and return the ``HeadRemoval`` of ``kind``.

    ``examples``: batches of *one* example each (no padding), as ``run(model, batch)`` takes
    them; ``run`` must compute every attention block on the whole sequence (a forward pass).
    The model's present heads are recorded; record again after pruning.
    """
    if kind not in REMOVAL_KINDS:
        raise ValueError(f"unknown removal kind {kind!r}: choose one of {REMOVAL_KINDS}")
    sites = attention_sites(model)
    seen: dict[tuple[str, int], list[torch.Tensor]] = {(s.kind, s.layer): [] for s in sites}

    def recorder(site: AttentionSite):
        def hook(module, args):
            seen[site.kind, site.layer].append(_one_example(site, args[0].detach()))

        return hook

    handles = [s.output.register_forward_pre_hook(recorder(s)) for s in sites]
    # fairseq's fused attention kernel never calls W_o as a module; its explicit path (the one it
    # takes for pruned heads, and under gates) does
    fused = {s.module: s.module.skip_embed_dim_check for s in sites if s.family == "fairseq"}
    for module in fused:
        module.skip_embed_dim_check = True
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for batch in examples:
                run(model, batch)
    finally:
        for h in handles:
            h.remove()
        for module, flag in fused.items():
            module.skip_embed_dim_check = flag
        model.train(was_training)
    if not any(seen.values()):
        raise ValueError("the reference set is empty: give reference_outputs at least one example")
    return HeadRemoval(
        kind,
        {k: _mean_by_position(v) for k, v in seen.items() if v},
        {k: torch.cat(v).mean(0) for k, v in seen.items() if v},
        {k: v for k, v in seen.items() if v} if kind == "resample" else {},
    )


def _one_example(site: AttentionSite, context: torch.Tensor) -> torch.Tensor:
    """W_o's input for a batch of one as ``[T, heads, head_dim]`` (float32, on the CPU)."""
    if context.shape[site.batch_dim] != 1:
        raise ValueError(
            f"reference_outputs takes batches of one example (no padding); {site.kind} "
            f"layer {site.layer} saw {context.shape[site.batch_dim]}: split the batches"
        )
    per_head = context.float().cpu().reshape(*context.shape[:-1], site.num_heads, site.head_dim)
    per_head = per_head.squeeze(site.batch_dim)
    return per_head if per_head.dim() == 3 else per_head[None]


def _mean_by_position(outputs: list[torch.Tensor]) -> torch.Tensor:
    """``[max T, H, d]``: at each position the mean over the examples that reach it."""
    length = max(o.shape[0] for o in outputs)
    total = torch.zeros(length, *outputs[0].shape[1:])
    count = torch.zeros(length, 1, 1)
    for o in outputs:
        total[: o.shape[0]] += o
        count[: o.shape[0]] += 1
    return total / count


def removal_digest(removal: HeadRemoval) -> str:
    """16 hex digits over a removal's kind and every reference tensor it holds (its means and its
    reference examples' outputs, bytes and shapes): equal exactly when it removes heads the same
    way, so a sweep cache can key on it."""
    import hashlib

    h = hashlib.sha256(removal.kind.encode())
    for name in ("means", "overall", "examples"):
        for key, value in sorted(getattr(removal, name).items()):
            for t in value if isinstance(value, list) else [value]:
                t = t.detach().cpu().contiguous()
                h.update(f"{name}|{key}|{tuple(t.shape)}|{t.dtype}".encode())
                h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]
