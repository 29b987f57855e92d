"""Fine-tune and evaluate a transformers sequence classifier on (text, text_pair, label) examples.

The recipe is the paper's BERT recipe (the authors' experiments/BERT/prepare_task.sh) at a smaller budget: weight decay
0.01 except on biases and LayerNorm, linear warm-up over the first 10% of steps then linear
decay, batch 32. The optimizer is torch's AdamW, or ``BertAdam``, the update the authors'
``pytorch-pretrained-bert`` ran (``optimizer: bertadam``, the paper profile). One change for a
2-core CPU: the word-embedding matrix (30,522 x 384 in MiniLM, half of its parameters) stays
frozen, which cuts a training step by a quarter; the task's few hundred words are all in the
pretrained vocabulary.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from ..base.devices import to_device


@dataclass(frozen=True)
class FineTuneConfig:
    epochs: float = 2.0
    lr: float = 5e-5
    batch_size: int = 32
    max_length: int = 64
    warmup: float = 0.1
    weight_decay: float = 0.01
    freeze_word_embeddings: bool = True
    seed: int = 0
    optimizer: str = "adamw"  # "adamw" (torch's) or "bertadam" (``BertAdam``, as the authors fine-tuned)

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"unknown optimizer {self.optimizer!r} in the fine-tuning recipe; use one of {OPTIMIZERS}"
            )


OPTIMIZERS = ("adamw", "bertadam")


class BertAdam(torch.optim.Optimizer):
    """The Adam of ``pytorch-pretrained-bert`` (``BertAdam``), which fine-tuned the paper's BERT
    models, without its built-in schedule (``fine_tune`` applies the same warm-up and linear decay
    to ``lr``). Per parameter and step: its gradient clipped to norm ``max_grad_norm``;
    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``; then
    ``w -= lr (m / (sqrt(v) + e) + weight_decay w)``. Unlike torch's AdamW there is no bias
    correction (the first steps are larger: ``1 / sqrt(1 - b2)`` times ``(1 - b1)``, 3.16 at the
    defaults, for a steady gradient), ``e`` is 1e-6, and the weight decay is scaled by ``lr``
    inside the same update."""

    def __init__(self, params, lr: float, *, b1: float = 0.9, b2: float = 0.999, e: float = 1e-6,
                 weight_decay: float = 0.0, max_grad_norm: float = 1.0):  # fmt: skip
        super().__init__(
            params, dict(lr=lr, b1=b1, b2=b2, e=e, weight_decay=weight_decay, max_grad_norm=max_grad_norm)
        )

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if group["max_grad_norm"] > 0:
                    torch.nn.utils.clip_grad_norm_(p, group["max_grad_norm"])
                state = self.state[p]
                if not state:
                    state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                m, v, g = state["m"], state["v"], p.grad
                m.mul_(group["b1"]).add_(g, alpha=1 - group["b1"])
                v.mul_(group["b2"]).addcmul_(g, g, value=1 - group["b2"])
                update = m / (v.sqrt() + group["e"]) + group["weight_decay"] * p
                p.add_(update, alpha=-group["lr"])
        return loss


def encode(tokenizer, examples: Sequence, max_length: int) -> dict[str, torch.Tensor]:
    """Tokenise ``examples`` (objects with ``text``, optional ``text_pair``; or pairs with
    ``premise``/``hypothesis``) into padded tensors [N, T]."""
    first, second = [], []
    for ex in examples:
        a, b = (ex.premise, ex.hypothesis) if hasattr(ex, "premise") else (ex.text, ex.text_pair)
        first.append(a)
        second.append(b)
    pairs = None if all(b is None for b in second) else second
    return dict(tokenizer(first, pairs, padding=True, truncation=True, max_length=max_length, return_tensors="pt"))


def labels_of(examples: Sequence) -> torch.Tensor:
    return torch.tensor([ex.label for ex in examples])


def batches(
    encoded: dict[str, torch.Tensor], batch_size: int, order: Sequence[int] | None = None, trim: bool = True
) -> Iterator[dict[str, torch.Tensor]]:
    """Slices of ``encoded`` in ``order``, trimmed to the longest sequence of each batch (with
    ``trim=False`` every batch keeps ``encoded``'s width: one shape, as compiled models want)."""
    n = len(next(iter(encoded.values())))
    order = list(range(n)) if order is None else list(order)
    for start in range(0, n, batch_size):
        idx = torch.tensor(order[start : start + batch_size])
        batch = {k: v[idx] for k, v in encoded.items()}
        if not trim:
            yield batch
            continue
        width = int(batch["attention_mask"].sum(1).max())
        yield {k: v[:, :width] if v.dim() == 2 else v for k, v in batch.items()}


def _parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def fine_tune(
    model: nn.Module, tokenizer, *, train: Sequence, config: FineTuneConfig, progress: bool = True
) -> list[float]:
    """Train ``model`` in place on ``train``; returns the mean training loss of every epoch.

    A fractional ``config.epochs`` (e.g. 1.5) trains on that many passes' worth of batches.
    """
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    if config.freeze_word_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    encoded = encode(tokenizer, train, config.max_length)
    encoded["labels"] = labels_of(train)
    per_epoch = math.ceil(len(train) / config.batch_size)
    total = max(1, round(per_epoch * config.epochs))
    warmup = max(1, round(total * config.warmup))
    groups = _parameter_groups(model, config.weight_decay)
    optimizer = (
        BertAdam(groups, lr=config.lr) if config.optimizer == "bertadam" else torch.optim.AdamW(groups, lr=config.lr)
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup)))
    )
    model.train()
    losses: list[float] = []
    step = 0
    bar = tqdm(total=total, desc="fine-tune", disable=not progress, unit="step")
    while step < total:
        order = list(range(len(train)))
        rng.shuffle(order)
        running, count = 0.0, 0
        for batch in batches(encoded, config.batch_size, order):
            loss = model(**to_device(batch, model)).loss
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            running, count, step = running + loss.item(), count + 1, step + 1
            bar.update()
            bar.set_postfix(loss=f"{running / count:.3f}")
            if step >= total:
                break
        losses.append(running / count)
    bar.close()
    model.eval()
    return losses


@torch.no_grad()
def by_length(encoded: dict[str, torch.Tensor]) -> list[int]:
    """Example indices from the shortest to the longest (stable): batches taken in this order
    carry little padding (a quarter to a half fewer tokens on the course sets)."""
    lengths = encoded["attention_mask"].sum(1).tolist()
    return sorted(range(len(lengths)), key=lengths.__getitem__)


def in_order(rows: torch.Tensor, order: Sequence[int]) -> torch.Tensor:
    """``rows`` computed in ``order`` (row i is example ``order[i]``) put back in example order."""
    out = torch.empty_like(rows)
    out[torch.tensor(list(order))] = rows
    return out


def predict(
    model: nn.Module, tokenizer, *, examples: Sequence, batch_size: int = 64, max_length: int = 64
) -> torch.Tensor:
    """Predicted label of each example, [N] int64 on the CPU. The model is used in eval mode;
    examples are batched by length and the predictions returned in their order."""
    model.eval()
    encoded = encode(tokenizer, examples, max_length)
    order = by_length(encoded)
    out = [model(**to_device(batch, model)).logits.argmax(-1).cpu() for batch in batches(encoded, batch_size, order)]
    return in_order(torch.cat(out), order)


def align_labels(model: nn.Module, ours: Sequence[str], theirs: Sequence[str] | None = None) -> list[int]:
    """Reorder the output rows of a fine-tuned checkpoint so that output ``i`` means ``ours[i]``.

    ``theirs``: the checkpoint's label name of each output (default: its ``config.id2label``).
    Names are compared case-insensitively. When they are not a permutation of ``ours`` (hub
    checkpoints often say only ``LABEL_0``...), the checkpoint is taken to follow GLUE's order,
    which is ours, and is left alone. Returns, for each of our labels, the output it came from.
    """
    n = len(ours)
    if theirs is None:
        theirs = [model.config.id2label[i] for i in range(n)]
    theirs = [str(t).lower() for t in theirs]
    wanted = [o.lower() for o in ours]
    if sorted(theirs) != sorted(wanted):
        return list(range(n))
    order = [theirs.index(o) for o in wanted]
    head = [m for m in model.modules() if isinstance(m, nn.Linear) and m.out_features == n][-1]
    with torch.no_grad():
        head.weight.copy_(head.weight[order].clone())
        if head.bias is not None:
            head.bias.copy_(head.bias[order].clone())
    model.config.id2label = dict(enumerate(ours))
    model.config.label2id = {name: i for i, name in enumerate(ours)}
    return order
