"""Hard-concrete head gates trained with an L0 penalty (Voita et al., ACL 2019): a fourth way to
choose which heads go, beside I_h, one-head ablation and chance.

Each head h gets a parameter log_alpha_h. In training a gate is drawn from the hard-concrete
distribution (Louizos et al. 2018)::

    u ~ U(0, 1);  s = sigmoid((log u - log(1 - u) + log_alpha) / beta)
    z = clamp(s * (zeta - gamma) + gamma, 0, 1)

which puts mass on exactly 0 and exactly 1; the expected number of open gates,
``sum_h sigmoid(log_alpha_h - beta * log(-gamma / zeta))``, is differentiable. The objective is
the task loss under the drawn gates plus ``penalty`` times the *share* of heads expected open
(a share, not a count, so that one penalty means the same on models with 72 or 144 heads). At
test time a gate is ``clamp(sigmoid(log_alpha) * (zeta - gamma) + gamma, 0, 1)``; the heads
whose gate is 0 are pruned. Larger penalties prune more: a few penalties give points on a
pruning curve, and the trained log_alpha also ranks the heads (``ranking``).

Here the model is **frozen**: only the gates learn. Voita et al. fine-tune the model with the
gates; freezing asks the same question as the paper's other orders (which heads can go from
*this* model, nothing retrained) and costs a backward pass through activations only.

The gates act through ``HeadGates(requires_grad=True)``: each step writes the drawn z into the
gate tensor, the task loss's gradient with respect to the gates is carried back to log_alpha by
the chain rule (``z.backward(gates.grad)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from ..base import ledger
from ..heads.gates import HeadGates, HeadSpec
from ..heads.sites import attention_sites, sites_by_kind

# Louizos et al.'s (2018) temperature 2/3 and stretch (-0.1, 1.1). Voita et al. (2019) keep the stretch
# but their code uses temperature 0.33: a sharper gate in training. We keep Louizos et al.'s value.
BETA, GAMMA, ZETA = 2 / 3, -0.1, 1.1


@dataclass
class ConcreteGates:
    """Trained gate parameters: ``log_alpha[kind]`` is ``[n_layers, n_heads]``, indexed like
    ``HeadGates.tensor(kind)``; ``penalty`` the L0 strength it was trained with."""

    log_alpha: dict[str, torch.Tensor]
    penalty: float

    def test_gates(self) -> dict[str, torch.Tensor]:
        """The deterministic gates, ``[n_layers, n_heads]`` per kind, in [0, 1]."""
        return {k: deterministic(a) for k, a in self.log_alpha.items()}

    def pruned(self, model: nn.Module) -> HeadSpec:
        """The heads of ``model`` whose test gate is 0, as ``{kind: {layer: [head, ...]}}``."""
        gates = self.test_gates()
        spec: dict[str, dict[int, list[int]]] = {}
        for s in attention_sites(model):
            closed = [h for h in s.heads if float(gates[s.kind][s.layer, h]) == 0.0]
            if closed:
                spec.setdefault(s.kind, {})[s.layer] = closed
        return spec

    def ranking(self, model: nn.Module) -> list[tuple[str, int, int]]:
        """Every present head of ``model`` as ``(kind, layer, head)``, lowest log_alpha (first to
        close) first."""
        heads = [(s.kind, s.layer, h) for s in attention_sites(model) for h in s.heads]
        return sorted(heads, key=lambda k: float(self.log_alpha[k[0]][k[1], k[2]]))


def deterministic(log_alpha: torch.Tensor) -> torch.Tensor:
    return torch.clamp(torch.sigmoid(log_alpha) * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)


def sample(log_alpha: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw of the hard-concrete gates, differentiable in ``log_alpha``."""
    u = torch.rand(log_alpha.shape, generator=generator).clamp(1e-6, 1 - 1e-6).to(log_alpha.device)
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_alpha) / BETA)
    return torch.clamp(s * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)


def expected_open(log_alpha: torch.Tensor) -> torch.Tensor:
    """Expected number of nonzero gates, summed (differentiable)."""
    return torch.sigmoid(log_alpha - BETA * math.log(-GAMMA / ZETA)).sum()


def train_concrete_gates(
    model: nn.Module,
    batches: Sequence[Any],
    *,
    loss: Callable[[nn.Module, Any], torch.Tensor],
    penalty: float,
    steps: int = 200,
    lr: float = 0.1,
    init: float = 3.0,
    seed: int = 0,
    progress: bool = True,
) -> ConcreteGates:
    """Train one gate per head of the frozen ``model`` for ``steps`` steps of Adam (``lr``),
    cycling through ``batches``; ``loss(model, batch)`` is the scalar task loss (e.g. mean
    cross-entropy in nats). ``penalty`` weighs the expected share of open heads. The gates start
    nearly open (log_alpha = ``init``). The model's parameters and mode are restored after."""
    if penalty < 0 or steps < 1:
        raise ValueError(f"penalty must be >= 0 and steps >= 1 (got penalty={penalty}, steps={steps})")
    batches = list(batches)
    if not batches:
        raise ValueError("train_concrete_gates needs at least one batch")
    groups = sites_by_kind(attention_sites(model))
    device = next(model.parameters()).device
    log_alpha = {
        k: torch.full((len(g), max(s.total_heads for s in g)), init, device=device, requires_grad=True)
        for k, g in groups.items()
    }
    present = {k: _present_mask(g, log_alpha[k].shape, device) for k, g in groups.items()}
    n_heads = sum(int(m.sum()) for m in present.values())
    optimiser = torch.optim.Adam(log_alpha.values(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    frozen = [(p, p.requires_grad) for p in model.parameters()]
    was_training = model.training
    model.eval()  # no dropout: the gates' noise is the only noise
    try:
        for p, _ in frozen:
            p.requires_grad_(False)
        with (
            ledger.entry("gate training", f"L0 gates, penalty {penalty:g} ({steps} steps)", model=model),
            HeadGates(model, requires_grad=True) as gates,
        ):
            for step in tqdm(range(steps), desc=f"L0 gates (penalty {penalty:g})", disable=not progress, unit="step"):
                optimiser.zero_grad()
                drawn = {k: sample(a, generator) * present[k] for k, a in log_alpha.items()}
                with torch.no_grad():
                    for k, z in drawn.items():
                        gates.tensor(k).copy_(z)
                        gates.tensor(k).grad = None
                task = loss(model, batches[step % len(batches)])
                task.backward()
                through_gates = sum((drawn[k] * gates.tensor(k).grad).sum() for k in drawn)
                share_open = (
                    sum(expected_open(a.masked_fill(~present[k], -1e4)) for k, a in log_alpha.items()) / n_heads
                )
                (through_gates + penalty * share_open).backward()
                optimiser.step()
    finally:
        for p, flag in frozen:
            p.requires_grad_(flag)
        model.train(was_training)
    return ConcreteGates({k: a.detach().cpu() for k, a in log_alpha.items()}, penalty)


def _present_mask(group, shape, device) -> torch.Tensor:
    mask = torch.zeros(shape, dtype=torch.bool, device=device)
    for s in group:
        mask[s.layer, s.heads] = True
    return mask
