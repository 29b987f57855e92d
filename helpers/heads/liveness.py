"""Is every head alive? Each head's weight scale |V_h|·|O_h|, and the heads far below their kind's.

Head h adds ``O_h · sum_j a_ij · V_h x_j`` to the residual stream, where ``V_h`` is its
``head_dim`` rows of the value projection (``[head_dim, d_model]``; under grouped-query
attention, its KV group's rows) and ``O_h`` its ``head_dim`` columns of the output projection
(``[d_model, head_dim]``). The attention weights a_ij sum to one, so whatever the head attends
to, its output is at most ``|O_h|·|V_h|`` times the largest input it reads (Frobenius norms).
The value bias ``b_h`` adds ``O_h · b_h`` whatever the input, which masking takes away too, so
``V_h`` here is the value rows with their bias as one more column: ``|[V_h | b_h]|``. A head whose
product is a thousandth of its neighbours' does nothing that masking could take away: it is
*dead* before anyone prunes it. An optimiser can leave heads so (an L2 penalty added to Adam's gradient
drives weights that help little to zero, and a head with both V_h and O_h near zero gets no
gradient to come back), and a study of which heads matter must know which heads were already
gone.

``head_norms`` gives the products; ``dead_heads(model)`` names the heads below ``DEAD_FLOOR``
times their kind's largest head (a reference that stays alive while any head of the kind does, where
the kind's median would itself be dead once most heads are), and every head of a kind whose largest
is below ``DEAD_FLOOR`` times the model's largest (a kind that died whole, which its own largest
head cannot show).

The products are in the weights' units: a norm layer's gain before the projection (pre-norm) or
after the previous block (post-norm) scales what V_h reads and is left out, so a share compares
heads by their weights only, not by what they write on a given input (masking, in the chapters,
measures that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .gates import Head
from .sites import AttentionSite, attention_sites, sites_by_kind

DEAD_FLOOR = 0.01
"""A head is dead when |V_h|·|O_h| is below this share of its kind's largest product. The
weakest living heads of the book's models held 2.6% of their kind's largest (SmolLM2, layer 0),
18% (the fine-tuned MiniLMs) and 19-36% (the course translation models trained with fairseq's
Adam), measured on 4 December 2026 before the value bias was counted; chapter 02 prints today's.
Heads that weight decay coupled into Adam kills fall to 0.1-1% of it within three epochs of
chapter 02's ablation, and keep falling (0.002% after four)."""


def _value_rows(site: AttentionSite) -> torch.Tensor:
    """The value projection's weight as ``[kv_groups * head_dim, d_model + 1]`` (storage order),
    its bias the last column (zeros where it has none)."""
    weight = site.value.weight.detach().float()
    bias = getattr(site.value, "bias", None)
    if site.fused_qkv:  # GPT-2's Conv1D c_attn: [d_model, 3 * width], value the last third
        weight = weight[:, 2 * weight.shape[1] // 3 :].T
        bias = None if bias is None else bias[2 * bias.shape[0] // 3 :]
    bias = torch.zeros(weight.shape[0]) if bias is None else bias.detach().float()
    return torch.cat([weight, bias[:, None]], 1)


def _output_columns(site: AttentionSite) -> torch.Tensor:
    """The output projection's weight as ``[d_model, heads * head_dim]`` (storage order)."""
    weight = site.output.weight.detach().float()
    return weight if isinstance(site.output, nn.Linear) else weight.T


def head_norms(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{kind: [n_layers, n_heads]}``: |[V_h | b_h]|_F · |O_h|_F of every head (original numbering), in
    the weights' units (output per unit input, an upper bound); NaN where a head was pruned.
    Under grouped-query attention V_h is the head's KV group's rows, shared by the group."""
    out: dict[str, torch.Tensor] = {}
    for kind, group in sites_by_kind(attention_sites(model)).items():
        grid = torch.full((len(group), max(s.total_heads for s in group)), float("nan"))
        for site in group:
            d = site.head_dim
            values, outputs = _value_rows(site), _output_columns(site)
            for position, head in enumerate(site.heads):
                g = site.kv_groups.index(site.kv_group(head))
                v = values[g * d : (g + 1) * d].norm()
                o = outputs[:, position * d : (position + 1) * d].norm()
                grid[site.layer, head] = float(v * o)
        out[kind] = grid
    return out


@dataclass(frozen=True)
class DeadHead:
    """A head below the floor: ``head`` (kind, layer, head), its ``norm`` |V_h|·|O_h| and its
    ``share`` of its kind's largest."""

    head: Head
    norm: float
    share: float


def dead_heads(
    model_or_norms: nn.Module | Mapping[str, torch.Tensor | Sequence], floor: float = DEAD_FLOOR
) -> list[DeadHead]:
    """The dead heads of a model, or of its ``head_norms`` (grids as tensors or nested lists):
    those whose |V_h|·|O_h| is below ``floor`` times their kind's largest, and every head of a
    kind whose largest is below ``floor`` times the model's largest (or zero), in (kind, layer,
    head) order; pruned heads (NaN) are skipped. ``share`` is each head's share of its kind's
    largest. ``floor`` must lie in (0, 1)."""
    if not 0 < floor < 1:
        raise ValueError(f"floor {floor} is a share of the kind's largest head: give a number between 0 and 1")
    norms = head_norms(model_or_norms) if isinstance(model_or_norms, nn.Module) else model_or_norms
    grids = {kind: torch.as_tensor(grid, dtype=torch.float64) for kind, grid in norms.items()}
    largest_of = {kind: float(torch.nan_to_num(grid, nan=0.0).max()) for kind, grid in grids.items()}
    model_largest = max(largest_of.values(), default=0.0)
    dead = []
    for kind, grid in grids.items():
        largest = largest_of[kind]
        whole_kind_dead = largest <= 0 or largest < floor * model_largest
        below = ~torch.isnan(grid) if whole_kind_dead else grid < floor * largest
        for layer, head in below.nonzero().tolist():
            value = float(grid[layer, head])
            dead.append(DeadHead((kind, layer, head), value, value / largest if largest > 0 else 0.0))
    return dead
