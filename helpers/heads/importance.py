"""Head importance (paper §4.1, Eq. 2): I_h = E_x | dL(x) / d xi_h |.

By the chain rule on Eq. 1, dL(x)/d xi_h = sum_t < Att_h(x)_t , dL(x)/d Att_h(x)_t > where t runs
over the query positions of example x. Two ways to place the absolute value:

* ``abs_per="example"`` (the paper's Eq. 2): |sum_t <.,.>| per example, averaged over examples.
* ``abs_per="token"`` (the authors' ``classifier_eval.py`` and ``prune.py``): sum_t |<.,.>| per example,
  averaged over examples. The authors then divide by the number of non-pad tokens instead of
  the number of examples: one constant for the whole model, so no ranking changes, and it
  cancels under per-layer normalization. Padded positions contribute nothing: their gradient
  is zero whenever the loss ignores them.

Each batch is one forward and one backward pass; gradients are taken with
``torch.autograd.grad`` on the gated W_o inputs, so nothing accumulates in any ``.grad`` and
nothing is carried from one batch to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from ..base import ledger
from .gates import HeadGates
from .sites import AttentionSite, head_grid

_LossFn = Callable[[nn.Module, Any], torch.Tensor]


def _check_options(normalize: str | None = "layer", abs_per: str = "example") -> None:
    """The options every estimate here takes, checked once: a ``ValueError`` naming the choices."""
    if normalize not in ("layer", None):
        raise ValueError(f"normalize must be 'layer' or None, got {normalize!r}")
    if abs_per not in ("example", "token"):
        raise ValueError(
            f"abs_per must be 'example' (the paper's Eq. 2) or 'token' (the authors' code), got {abs_per!r}"
        )


def _normalized(scores: dict[str, torch.Tensor], normalize: str | None) -> dict[str, torch.Tensor]:
    """``scores`` ``{kind: [n_layers, n_heads]}`` with each layer divided by its L2 norm when
    ``normalize="layer"`` (paper §4.1, after Molchanov et al. 2017); as they are with None."""
    if normalize != "layer":
        return scores
    return {kind: t / (t.norm(dim=-1, keepdim=True) + 1e-20) for kind, t in scores.items()}


@contextmanager
def _in_eval(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode (dropout off, as in the authors' code), its training flag restored."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def head_importance(
    model: nn.Module,
    batches: Iterable[Any],
    loss_fn: _LossFn,
    *,
    normalize: str | None = "layer",
    abs_per: str = "example",
    gates: HeadGates | None = None,
    progress: bool = True,
) -> dict[str, torch.Tensor]:
    """Importance of every head, ``{kind: tensor [n_layers, n_heads]}`` (float64, CPU).

    Args:
        model: a supported model. It is put in eval mode (dropout off, as in the authors'
            code) and its training flag is restored afterwards.
        batches: any iterable; each item is passed unchanged to ``loss_fn``.
        loss_fn: ``loss_fn(model, batch) -> losses`` of shape ``[batch_size]``: L(x) for
            each example x (not averaged; e.g. ``reduction="none"``, or token losses summed
            per sentence for translation).
        normalize: ``"layer"`` divides each layer's scores by their L2 norm (paper §4.1,
            following Molchanov et al. 2017); ``None`` returns raw expectations.
        abs_per: ``"example"`` (paper) or ``"token"`` (authors' code); see module docstring.
        gates: an active ``HeadGates`` to use instead of fresh ones, so heads already masked
            stay masked while importance is re-estimated (paper's ``--exact_pruning``).
        progress: show a tqdm bar over batches.

    Heads that were physically pruned score 0. Rows of a layer with no head left stay 0.
    """
    _check_options(normalize, abs_per)
    if gates is not None and not gates.active:
        raise RuntimeError("pass gates that are installed (inside `with HeadGates(model) as gates:`)")

    totals = {kind: torch.zeros(shape, dtype=torch.float64) for kind, shape in head_grid(model).items()}
    n_examples = 0
    with (
        _in_eval(model),
        ledger.entry("importance", "head importance", model=model) as timed,
        nullcontext(gates) if gates is not None else HeadGates(model) as g,
    ):
        for batch in tqdm(batches, desc="head importance", disable=not progress, leave=False):
            n_examples += _accumulate(model, g, batch=batch, loss_fn=loss_fn, abs_per=abs_per, totals=totals)
        timed.examples = n_examples
    if n_examples == 0:
        raise ValueError("head_importance got no batches")
    return _normalized({kind: t / n_examples for kind, t in totals.items()}, normalize)


def importance_terms(
    model: nn.Module, batches: Iterable[Any], loss_fn: _LossFn, *, abs_per: str = "example", progress: bool = True
) -> dict[str, torch.Tensor]:
    """The terms ``head_importance`` averages, one per example: ``{kind: [examples, n_layers,
    n_heads]}`` (float64, CPU), |dL(x)/d xi_h| per example x (``abs_per`` as there). Their mean
    over any subset of the examples, normalized by ``from_terms``, is that subset's I_h: what
    ``head_importance`` gives on those examples alone, up to float64 rounding. One pass serves
    every subset (how many examples importance needs: chapter 06)."""
    _check_options(abs_per=abs_per)
    shapes = head_grid(model)
    parts: dict[str, list[torch.Tensor]] = {kind: [] for kind in shapes}
    examples = 0
    with (
        _in_eval(model),
        ledger.entry("importance", "head importance terms", model=model) as timed,
        HeadGates(model) as g,
    ):
        for batch in tqdm(batches, desc="head importance terms", disable=not progress, leave=False):
            found: dict[str, list] = {}
            size = _accumulate(model, g, batch=batch, loss_fn=loss_fn, abs_per=abs_per, totals=found, per_example=True)
            examples += size
            for kind, shape in shapes.items():
                batch_terms = torch.zeros((size, *shape), dtype=torch.float64)  # [batch, n_layers, n_heads]
                for layer, heads, terms in found.get(kind, []):
                    batch_terms[:, layer, heads] = terms
                parts[kind].append(batch_terms)
        timed.examples = examples
    if not examples:
        raise ValueError("importance_terms got no batches")
    return {kind: torch.cat(p) for kind, p in parts.items()}


def from_terms(
    terms: dict[str, torch.Tensor], examples: Iterable[int] | None = None, normalize: str | None = "layer"
) -> dict[str, torch.Tensor]:
    """I_h of the ``examples`` (positions; all when None) from ``importance_terms``: the terms'
    mean, each layer divided by its L2 norm with ``normalize="layer"`` (as ``head_importance``)."""
    _check_options(normalize)
    picked = {
        kind: t if examples is None else t[torch.as_tensor(list(examples), dtype=torch.long)]
        for kind, t in terms.items()
    }
    return _normalized({kind: t.sum(0) / len(t) for kind, t in picked.items()}, normalize)


def _accumulate(
    model, gates: HeadGates, *, batch, loss_fn: _LossFn, abs_per: str, totals, per_example: bool = False
) -> int:
    """One forward + backward on ``batch``; adds per-head sums into ``totals`` (with
    ``per_example``: appends each site's ``(layer, heads, [batch, heads] terms)`` to
    ``totals[kind]``); returns the batch size."""
    with torch.enable_grad(), gates.recording() as records:
        losses = loss_fn(model, batch)
    if losses.dim() != 1:
        raise ValueError(
            f"loss_fn must return one loss per example, shape [batch_size]; got shape {tuple(losses.shape)}. "
            "Use reduction='none' (and sum token losses per sentence)."
        )
    grads = torch.autograd.grad(losses.sum(), [r.gated for r in records], allow_unused=True)
    batch_size = losses.shape[0]
    # a loss may run the model more than once per example (a sentence pair encoded in two calls):
    # each call's positions are some of the example's, so a site's calls are joined before the
    # absolute value, which Eq. 2 takes of the whole derivative
    calls: dict[tuple[str, int], tuple[AttentionSite, list[torch.Tensor]]] = {}
    for record, grad in zip(records, grads):
        if grad is None:  # this block does not reach the loss
            continue
        site = record.site
        if record.context.shape[site.batch_dim] != batch_size:
            raise ValueError(
                f"{site.kind} layer {site.layer} saw a batch of {record.context.shape[site.batch_dim]} "
                f"but loss_fn returned {batch_size} losses; return one loss per example"
            )
        # per-position dot products <Att_h(x)_t, dL/dAtt_h(x)_t>: [batch, positions, heads]
        dots = (record.context * grad).movedim(site.batch_dim, 0)
        dots = dots.reshape(batch_size, -1, site.num_heads, site.head_dim).sum(-1).double()
        calls.setdefault((site.kind, site.layer), (site, []))[1].append(dots)
    for site, parts in calls.values():
        dots = torch.cat(parts, dim=1)  # [batch, every call's positions, heads]
        terms = dots.sum(1).abs() if abs_per == "example" else dots.abs().sum(1)  # [batch, heads]
        if per_example:
            totals.setdefault(site.kind, []).append((site.layer, site.heads, terms.cpu()))
        else:
            totals[site.kind][site.layer, site.heads] += terms.sum(0).cpu()
    return batch_size


def rank_agreement(a: torch.Tensor, b: torch.Tensor, share: float = 0.5) -> tuple[float, float]:
    """How far two importance scores of the same heads (any shape, e.g. ``[layers, heads]``) agree:
    ``(Spearman's rank correlation, the share of the least important ``share`` of the heads that
    both put there)`` (pruning reads only the second)."""
    from scipy.stats import spearmanr

    a, b = a.flatten(), b.flatten()
    k = int(len(a) * share)
    lowest = lambda scores: set(scores.argsort()[:k].tolist())
    return float(spearmanr(a.numpy(), b.numpy()).statistic), len(lowest(a) & lowest(b)) / k
