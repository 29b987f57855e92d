"""Evaluate a BERT sequence classifier with its last layer computed at the first token only.

``BertForSequenceClassification`` reads one vector, the last layer's output at position 0 (the
pooler's ``[CLS]``). Every layer below needs all positions (they are the keys and values of the
layers above), but the last layer's query, output projection and feed-forward block matter at
position 0 alone. ``first_token_only(model)`` swaps the last layer's forward for one that
computes keys and values for every position and everything else for position 0: its output is
``[B, 1, hidden]`` instead of ``[B, T, hidden]``, and the logits are those of the full forward
(up to float rounding: the same products, summed in another blocking). For MiniLM-L6 that is
about 5/6 of one layer's arithmetic per pass, and in a one-head sweep that replays the layers
below (ablation.py) about a quarter of the sweep.

Head gates and pruning work as before: the gates act on the output projection's input, which
is now ``[B, 1, heads x head_dim]``. That input comes from a call of the last layer's
``attention.self`` module (its forward swapped too), so hooks on that module see it and a sweep
can replay it (``helpers.sweeps.ablation``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


def supports_first_token_only(model: nn.Module) -> bool:
    """Whether ``first_token_only`` applies: a BERT encoder classifier whose head reads position 0,
    with no cross-attention and no chunked feed-forward."""
    if type(model).__name__ != "BertForSequenceClassification":
        return False
    config = model.config
    return not config.is_decoder and not config.add_cross_attention and not config.chunk_size_feed_forward


@contextmanager
def first_token_only(model: nn.Module) -> Iterator[bool]:
    """Within the block, the model's last layer computes position 0 only (see the module
    docstring). Yields whether it did; for a model ``supports_first_token_only`` rejects it
    changes nothing and yields False, so callers may use it on any classifier."""
    if not supports_first_token_only(model):
        yield False
        return
    layer = model.bert.encoder.layer[-1]
    attention = layer.attention.self
    layer.forward = _first_token_forward(layer)
    attention.forward = lambda first, hidden_states, attention_mask: _first_query_context(
        attention, first, hidden_states, attention_mask
    )
    try:
        yield True
    finally:
        del layer.forward  # back to BertLayer.forward
        del attention.forward  # back to BertSelfAttention.forward


def _first_token_forward(layer: nn.Module):
    def forward(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args, **kwargs):
        # hidden_states [B, T, hidden]; attention_mask None or broadcastable to [B, heads, T, T]
        first = hidden_states[:, :1]  # [B, 1, hidden]
        context = layer.attention.self(first, hidden_states, attention_mask)  # [B, 1, heads x head_dim]
        return layer.feed_forward_chunk(layer.attention.output(context, first))  # [B, 1, hidden]

    return forward


def _first_query_context(
    attention: nn.Module, first: torch.Tensor, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    """``[B, 1, heads x head_dim]``: the attention output of position 0 over all positions."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.bert.modeling_bert import eager_attention_forward

    def heads(x: torch.Tensor) -> torch.Tensor:  # [B, T, H*d] -> [B, H, T, d]
        return x.view(*x.shape[:2], -1, attention.attention_head_size).transpose(1, 2)

    query, key, value = (
        heads(attention.query(first)),
        heads(attention.key(hidden_states)),
        heads(attention.value(hidden_states)),
    )
    if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[-2] > 1:
        attention_mask = attention_mask[:, :, :1]  # the first query's row
    interface = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager_attention_forward)
    context, _ = interface(attention, query, key, value, attention_mask, dropout=0.0, scaling=attention.scaling)
    return context.reshape(first.shape[0], 1, -1)
