"""Induction heads and in-context copying in a decoder-only LM (Olsson et al. 2022).

The probe is a sequence of random tokens repeated twice, after a BOS token:
``[bos, t_1 .. t_L, t_1 .. t_L]``. In the second copy, the token at position ``p`` last occurred
at ``p - L``; an *induction head* attends from ``p`` to the token after that occurrence,
``p - L + 1``, whose embedding is the next token to predict. A model that copies predicts the
second copy almost perfectly; nothing in the first copy can be predicted.

    batch = repeated_tokens(vocab_size=49152, length=64, batch=8, seed=0, low=100)
    scores = induction_scores(model, batch)     # [layers, heads]: mean attention to p - L + 1
    copy = copying_nll(model, batch)            # [B, 2]: NLL (nats) and tokens of the second copy

``copying_nll`` has ``token_nll``'s shape ``[B, 2]``, so perplexity scorers and importance take
it as they take the likelihood on text.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from ..base.devices import to_device
from ..heads.sites import attention_sites


def repeated_tokens(
    vocab_size: int, length: int, *, batch: int, seed: int, low: int = 0, bos: int | None = None
) -> dict:
    """A probe batch: ``input_ids`` ``[batch, 1 + 2 * length]`` (``bos``, or ``low`` when None,
    then ``length`` tokens drawn uniformly from ``[low, vocab_size)`` with ``seed``, twice) and
    ``attention_mask`` of ones; the functions below read ``length`` from the width."""
    if length < 2 or not 0 <= low < vocab_size:
        raise ValueError(
            f"need length >= 2 and 0 <= low < vocab_size, got length={length}, low={low}, vocab_size={vocab_size}"
        )
    draw = torch.randint(low, vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))
    first = torch.full((batch, 1), low if bos is None else bos, dtype=torch.long)
    ids = torch.cat([first, draw, draw], 1)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _copy_length(batch: dict) -> int:
    """L of a ``repeated_tokens`` batch of width 1 + 2L."""
    width = batch["input_ids"].shape[1]
    if width < 5 or width % 2 == 0:
        raise ValueError(f"a repeated-tokens batch has width 1 + 2L with L >= 2; got width {width}")
    return (width - 1) // 2


def _model_inputs(batch: dict, model: nn.Module) -> dict:
    """The batch's ids and mask, on ``model``'s device."""
    return to_device({"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}, model)


def copying_stats(model: nn.Module, batch: dict) -> torch.Tensor:
    """``[B, 3]`` from one forward pass: the summed negative log-likelihood (nats) of the second
    copy's tokens 2..L (each predictable from the first copy), their number L - 1, and how many of
    them the model's top prediction gets right. The first two columns are ``copying_nll``. On the
    CPU, whatever the model's device."""
    length = _copy_length(batch)
    inputs = _model_inputs(batch, model)
    logits = model(**inputs).logits  # [B, 1 + 2L, vocab]
    # position p predicts p + 1; the second copy's tokens 2..L sit at L + 2 .. 2L
    predict = logits[:, length + 1 : 2 * length]  # [B, L - 1, vocab]
    gold = inputs["input_ids"][:, length + 2 :]  # [B, L - 1]
    nll = F.cross_entropy(predict.float().transpose(1, 2), gold, reduction="none").sum(1)
    correct = (predict.argmax(-1) == gold).sum(1).to(nll.dtype)
    return torch.stack([nll, torch.full_like(nll, length - 1), correct], 1).cpu()


def copying_nll(model: nn.Module, batch: dict) -> torch.Tensor:
    """``[B, 2]``: the summed negative log-likelihood (nats) of the second copy's tokens 2..L
    and their number, L - 1 (``token_nll``'s shape, for perplexity scorers and importance)."""
    return copying_stats(model, batch)[:, :2]


def copying_accuracy(model: nn.Module, batch: dict) -> float:
    """Share of the second copy's tokens 2..L that the model's top prediction gets right."""
    with torch.no_grad():
        stats = copying_stats(model, batch)
    return float(stats[:, 2].sum() / stats[:, 1].sum())


@contextmanager
def eager_attention(model: nn.Module):
    """Run ``model`` with transformers' eager attention (the only one that returns attention
    probabilities), then restore its own."""
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        yield model
    finally:
        model.set_attn_implementation(before)


def induction_scores(model: nn.Module, batch: dict) -> torch.Tensor:
    """``[layers, heads]`` (original numbering): each head's attention probability from every
    position of the second copy whose next token is in the probe (tokens 1..L-1) to the token
    after that token's occurrence in the first copy, averaged over positions and examples; 1 is a
    perfect induction head, about 1/position a uniform one. Pruned heads are NaN."""
    length = _copy_length(batch)
    sites = [s for s in attention_sites(model) if s.kind == "self"]
    out = torch.full((len(sites), sites[0].total_heads), float("nan"))
    with eager_attention(model), torch.no_grad():
        attentions = model(**_model_inputs(batch, model), output_attentions=True).attentions
    queries = torch.arange(length + 1, 2 * length)  # second copy's tokens 1..L-1 (each predicts the next)
    targets = queries - length + 1  # the token after the earlier occurrence
    for site, probs in zip(sites, attentions, strict=True):
        if probs is None or not site.heads:
            continue
        taken = probs[:, :, queries.to(probs.device), targets.to(probs.device)].float().mean((0, 2))  # [kept heads]
        out[site.layer, site.heads] = taken.cpu()
    return out
