"""What the pruning chapters need from each track: a score for a split, and per-example losses
for the importance estimate (``head_importance``'s ``batches`` and ``loss_fn``).

* Classifier: the task's metric (accuracy, Matthews correlation or F1) of argmax predictions;
  loss = cross-entropy of the gold label, one value per example.
* Translation: tokenised corpus BLEU of beam-search output; loss = summed token cross-entropy
  of the reference, one value per sentence, teacher-forced (no label smoothing: I_h is the
  gradient of the model's likelihood of the data).

Beside the paper's metrics, a score with more power: the likelihood. ``translation_nll`` gives
each reference's teacher-forced negative log-likelihood and its number of target tokens (``[N,
2]``; ``metrics.log_likelihood`` of their sums is the mean log-likelihood per token), one
forward pass and no decoding, so every sentence's change under a head mask counts, not only the
n-grams that change in a decoded output.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..base import ledger
from ..base.devices import to_device
from ..heads.metrics import METRICS, BleuDefinition, bleu, bleu_from_stats, bleu_stats, log_likelihood
from ..sweeps.config_batches import repeat_rows
from .classifier_training import batches, by_length, encode, in_order, labels_of
from .first_token_only import first_token_only
from .translation_model import MAX_LEN_A, MAX_LEN_B

_LOG_LIKELIHOOD = "log_likelihood"  # a classifier_scorer metric: the gold label's mean log-probability (nats)


def classifier_scorer(
    tokenizer,
    examples: Sequence,
    *,
    metric: str = "accuracy",
    max_length: int = 64,
    batch_size: int = 64,
    configs_per_pass: int = 1,
) -> Callable[[nn.Module], float]:
    """``score(model)``: ``metric`` of the model's predictions on ``examples`` (a BERT classifier's
    last layer at its first token only, first_token_only.py), or with ``metric="log_likelihood"``
    the mean log-probability of the gold labels (nats, higher is better). ``score.many(model,
    specs)`` gives the score under each head spec, ``configs_per_pass`` per forward pass, the
    passes split over processes on a CPU (``gated_passes``); ``pruning_curve`` uses it."""
    return classifier_scorers(
        tokenizer,
        examples,
        metrics=[metric],
        max_length=max_length,
        batch_size=batch_size,
        configs_per_pass=configs_per_pass,
    )[metric]


def classifier_scorers(
    tokenizer,
    examples: Sequence,
    *,
    metrics: Sequence[str],
    max_length: int = 64,
    batch_size: int = 64,
    configs_per_pass: int = 1,
) -> dict[str, Callable[[nn.Module], float]]:
    """``{metric: classifier_scorer(..., metric)}`` whose ``many`` share their passes: every
    scorer derives its metric from the label log-probabilities ``[N, labels]`` under a head spec,
    kept per model object and set of masked heads, so a spec one of them has scored on a model is
    not computed again by another (a model's weights must not change between the calls)."""
    for metric in metrics:
        if metric not in METRICS and metric != _LOG_LIKELIHOOD:
            raise ValueError(
                f"unknown metric {metric!r}; the classifier metrics are {sorted([*METRICS, _LOG_LIKELIHOOD])}"
            )
    gold = [e.label for e in examples]
    encoded = encode(tokenizer, examples, max_length)
    order = by_length(encoded)
    data = list(batches(encoded, batch_size, order))
    kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {heads: [N, labels]}

    @torch.no_grad()
    def log_probs_of_copies(model: nn.Module, copies: int, gated) -> list[torch.Tensor]:
        model.eval()
        log_probs = []  # per batch: [copies, B, labels]
        with first_token_only(model):
            for batch in data:
                rows = len(batch["input_ids"])
                with gated(rows * copies):
                    logits = model(**to_device(repeat_rows(batch, copies), model)).logits
                log_probs.append(torch.log_softmax(logits.float(), -1).cpu().view(copies, rows, -1))
        return [in_order(lp, order) for lp in torch.cat(log_probs, 1)]  # each [N, labels]

    def value(metric: str, lp: torch.Tensor) -> float:
        if metric == _LOG_LIKELIHOOD:
            return float(lp[torch.arange(len(gold)), torch.tensor(gold)].double().mean())
        return METRICS[metric](lp.argmax(-1), gold)

    def many_log_probs(model: nn.Module, specs: Sequence[dict]) -> list[torch.Tensor]:
        from ..sweeps.ablation import masked_passes

        with ledger.entry(
            "classifier scoring", "classifier scores", model=model, examples=len(examples), configs=len(specs)
        ) as timed:
            return _kept_outputs(
                kept,
                model,
                specs=specs,
                timed=timed,
                compute=lambda missing: (
                    lp
                    for _, lp in masked_passes(
                        model,
                        missing,
                        run=log_probs_of_copies,
                        configs_per_pass=configs_per_pass,
                        desc="classifier scores",
                    )
                ),
            )

    def stats(metric: str, lp: torch.Tensor) -> np.ndarray:
        if metric == _LOG_LIKELIHOOD:  # (negative log-probability of the gold label, 1) per example
            nll = -lp[torch.arange(len(gold)), torch.tensor(gold)].double().numpy()
            return np.stack([nll, np.ones_like(nll)], 1)
        return METRICS[metric].stats(lp.argmax(-1).numpy(), gold)

    def scorer(metric: str) -> Callable[[nn.Module], float]:
        def score(model: nn.Module) -> float:
            with ledger.entry("classifier scoring", "classifier score", model=model, examples=len(examples)):
                return value(metric, log_probs_of_copies(model, 1, lambda rows: contextlib.nullcontext())[0])

        score.many = lambda model, specs: [value(metric, lp) for lp in many_log_probs(model, specs)]
        score.stats = lambda model, specs: [stats(metric, lp) for lp in many_log_probs(model, specs)]
        score.from_stats = log_likelihood if metric == _LOG_LIKELIHOOD else METRICS[metric].score
        score.examples = len(examples)
        return score

    return {metric: scorer(metric) for metric in metrics}


def classifier_loss_batches(tokenizer, examples: Sequence, max_length: int = 64, batch_size: int = 32) -> list[dict]:
    """Tokenised batches with their ``labels``, for ``classifier_loss``."""
    encoded = encode(tokenizer, examples, max_length)
    encoded["labels"] = labels_of(examples)
    return list(batches(encoded, batch_size, by_length(encoded)))


def classifier_loss(model: nn.Module, batch: dict) -> torch.Tensor:
    """Cross-entropy of the gold label of each example, [B] (nats)."""
    batch = to_device(batch, model)
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    return F.cross_entropy(model(**inputs).logits, batch["labels"], reduction="none")


def translation_scorer(
    pairs: Sequence,
    beam: int = 5,
    *,
    batch_size: int = 64,
    max_len_b: int = MAX_LEN_B,
    configs_per_pass: int = 0,
    max_len_a: float = MAX_LEN_A,
    definition: BleuDefinition = BleuDefinition(),
) -> Callable[[nn.Module], float]:
    """``score(model)``: BLEU of beam-search translations of ``pairs`` against their references,
    tokenized unless ``definition`` says otherwise (``metrics.BleuDefinition``; ``score.signature``
    names it), decoded with ``max_len_a``, ``max_len_b`` as in ``translation_model.translate``.
    ``score.many(model, specs)`` gives the score under each head spec, ``configs_per_pass`` of
    them per search (0: as many as the device holds, as ``masked_translations``; ``pruning_curve``
    uses it); ``score.examples``: how many pairs it scores."""
    from .sweep_decoder import decode_copies

    sources, refs = [p.src for p in pairs], definition.references(pairs)
    tokenize = definition.tokenize

    def score(model: nn.Module) -> float:
        with ledger.entry("decoding", f"BLEU, beam {beam}", model=model, examples=len(sources)):
            (hyps,) = decode_copies(
                model, sources, copies=1, beam=beam, batch_size=batch_size, max_len_b=max_len_b, max_len_a=max_len_a
            )
            return bleu(definition.hypotheses(hyps), refs, tokenize)[0]

    def hypotheses(model: nn.Module, specs: Sequence[dict]) -> list[list[str]]:
        with ledger.entry(
            "decoding", f"BLEU, beam {beam}", model=model, examples=len(sources), configs=len(specs)
        ) as timed:
            return _kept_outputs(
                kept,
                model,
                specs=specs,
                timed=timed,
                compute=lambda missing: (
                    hyps
                    for _, hyps in masked_translations(
                        model,
                        sources,
                        configs=missing,
                        configs_per_pass=configs_per_pass,
                        progress=False,
                        beam=beam,
                        batch_size=batch_size,
                        max_len_b=max_len_b,
                        max_len_a=max_len_a,
                    )
                ),
            )

    kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {heads: hypotheses}
    score.many = lambda model, specs: [
        bleu(definition.hypotheses(hyps), refs, tokenize)[0] for hyps in hypotheses(model, specs)
    ]
    score.stats = lambda model, specs: [
        bleu_stats(definition.hypotheses(hyps), refs, tokenize) for hyps in hypotheses(model, specs)
    ]
    score.from_stats = lambda sums: bleu_from_stats(sums, tokenize)
    score.signature = definition.signature()
    score.examples = len(pairs)  # what a step is scored on (result tables record it)
    return score


def _kept_outputs(
    kept: weakref.WeakKeyDictionary,
    model: nn.Module,
    *,
    specs: Sequence[dict],
    timed,
    compute: Callable[[list[dict]], Iterator],
) -> list:
    """Each spec's outputs, from ``kept`` (per model object and set of masked heads) or computed
    by ``compute(missing specs)`` (one output per spec, in order) and kept: a scorer's ``many``
    and ``stats`` then share one pass (a model's weights must not change between the calls)."""
    from ..heads.gates import heads_in

    known = kept.setdefault(model, {})
    missing = list({heads_in(s): s for s in specs if heads_in(s) not in known}.items())
    timed.set_computed(len(missing))
    if missing:
        for (heads, _), out in zip(missing, compute([s for _, s in missing])):
            known[heads] = out
    return [known[heads_in(s)] for s in specs]


def masked_translations(
    model: nn.Module,
    sources: Sequence[str],
    *,
    configs: Sequence,
    configs_per_pass: int,
    progress: bool = True,
    desc: str = "masked translations",
    **decoding,
):
    """Yield ``(config, translations of sources)`` for each ``Config`` or head spec in
    ``configs``, ``configs_per_pass`` of them per search (0: as many as the device holds,
    ``sweep_decoder.configs_per_pass_for``; ``gated_passes`` with ``sweep_decoder.decode_copies``:
    greedy for one beam, fairseq's beam search for more; ``decoding``: its beam, lenpen,
    batch_size, max_len_a, max_len_b)."""
    from ..sweeps.ablation import gated_passes
    from .sweep_decoder import configs_per_pass_for, decode_copies

    if configs_per_pass == 0:
        configs_per_pass = configs_per_pass_for(model, sources, **decoding)

    def decode(m: nn.Module, copies: int, gated):
        return decode_copies(m, sources, copies=copies, gated=gated, **decoding)

    return gated_passes(model, configs, run=decode, configs_per_pass=configs_per_pass, progress=progress, desc=desc)


def translation_loss_batches(model: nn.Module, pairs: Sequence, max_tokens: int = 2000) -> list[dict]:
    """fairseq-style batches of ``pairs`` in ``model``'s dictionaries, for ``translation_loss``."""
    return [batch for _, batch in _indexed_loss_batches(model, pairs, max_tokens)]


def _indexed_loss_batches(
    model: nn.Module, pairs: Sequence, max_tokens: int, left_pad_source: bool = True
) -> list[tuple[list[int], dict]]:
    from .translation_model import collate, encode_pairs, token_batches

    items = encode_pairs(pairs, model)
    pad, eos = model.decoder.dictionary.pad(), model.decoder.dictionary.eos()
    indexed = [(idx, collate([items[i] for i in idx], pad, eos)) for idx in token_batches(items, max_tokens)]
    return indexed if left_pad_source else [(idx, _sources_right_padded(batch, pad)) for idx, batch in indexed]


def _sources_right_padded(batch: dict, pad: int) -> dict:
    """``batch`` with its left-padded sources moved to the left of each row (padding at the end):
    fairseq's encoder reads either layout the same way (its padding mask and positions skip the
    pads), and right padding keeps each token at its position, which mean ablation needs."""
    src = batch["net_input"]["src_tokens"]
    right = torch.full_like(src, pad)
    for i, length in enumerate(batch["net_input"]["src_lengths"].tolist()):
        right[i, :length] = src[i, src.shape[1] - length :]
    return {**batch, "net_input": {**batch["net_input"], "src_tokens": right}}


def translation_reference(model: nn.Module, pairs: Sequence, kind: str):
    """The ``HeadRemoval`` of ``kind`` (removal.py) with ``pairs`` as the reference set, one
    teacher-forced pass per pair."""
    from ..heads.removal import reference_outputs

    one_each = [batch for pair in pairs for _, batch in _indexed_loss_batches(model, [pair], 10**6)]
    return reference_outputs(model, one_each, translation_loss, kind)


@torch.no_grad()
def _nll_of_copies(
    model: nn.Module, indexed: list[tuple[list[int], dict]], *, n: int, copies: int, gated
) -> list[np.ndarray]:
    """``copies`` arrays ``[n, 2]`` (summed NLL in nats, target tokens) of the sentences in
    ``indexed`` batches, copy k computed on rows ``[k * b, (k + 1) * b)`` of each repeated batch
    inside ``gated(copies * b)`` (``gated_passes``)."""
    model.eval()
    pad = model.decoder.dictionary.pad()
    out = np.zeros((copies, n, 2))
    for idx, batch in indexed:
        with gated(copies * len(idx)):
            nll = translation_loss(model, repeat_rows(batch, copies))  # [copies * b]
        out[:, idx, 0] = nll.double().cpu().numpy().reshape(copies, len(idx))
        out[:, idx, 1] = batch["target"].ne(pad).sum(1).numpy()  # </s> included
    return list(out)


def translation_nll(model: nn.Module, pairs: Sequence, max_tokens: int = 2000) -> np.ndarray:
    """``[N, 2]``: each reference's teacher-forced negative log-likelihood (summed over its target
    tokens, ``</s>`` included; nats, no label smoothing) and its number of target tokens, in the
    order of ``pairs``; sentences are batched by length up to ``max_tokens`` padded tokens."""
    indexed = _indexed_loss_batches(model, pairs, max_tokens)
    return _nll_of_copies(model, indexed, n=len(pairs), copies=1, gated=lambda rows: contextlib.nullcontext())[0]


def masked_translation_nll(
    model: nn.Module,
    pairs: Sequence,
    *,
    configs: Sequence,
    configs_per_pass: int = 1,
    progress: bool = True,
    max_tokens: int = 2000,
    desc: str = "masked likelihoods",
):
    """Yield ``(config, translation_nll rows)`` for each ``Config`` or head spec in ``configs``,
    ``configs_per_pass`` of them per forward pass (``gated_passes``; the rows equal one
    configuration at a time), or with one per pass on a CPU, each on the model with its heads
    physically removed (``ablation.masked_passes``). On 2 CPU cores one configuration per pass is fastest: 20 pruning
    steps of the course model on 400 verses took 9.5 s, against 12.0 s with 4 per pass and 15.8 s
    with 12 (the repeated batch's logits over the 4k-word vocabulary outgrow the caches)."""
    from ..sweeps.ablation import masked_passes

    indexed = _indexed_loss_batches(model, pairs, max_tokens)
    return masked_passes(
        model,
        configs,
        run=lambda m, copies, gated: _nll_of_copies(m, indexed, n=len(pairs), copies=copies, gated=gated),
        configs_per_pass=configs_per_pass,
        desc=desc,
        progress=progress,
    )


def single_layer_translation_nll(
    model: nn.Module,
    pairs: Sequence,
    *,
    configs: Sequence,
    progress: bool = True,
    max_tokens: int = 2000,
    removal=None,
) -> Iterator[tuple[Any, np.ndarray]]:
    """``masked_translation_nll`` for configurations that each mask heads of a single layer
    (``Config``s: one head, all but one), by ``ablation.single_layer_sweep``: the teacher-forced
    pass replays the unmasked layers below the masked one (the whole encoder for a decoder
    kind), with the same rows. Yields ``(config, rows)``, ``UNMASKED`` too when it is in
    ``configs``, in the order of ``configs``. ``removal``: a ``HeadRemoval`` other than zero
    (mean, resample); the sources are then right-padded so that positions line up."""
    from ..sweeps.ablation import single_layer_sweep
    from ..sweeps.config_batches import UNMASKED

    indexed = _indexed_loss_batches(model, pairs, max_tokens, left_pad_source=removal is None)
    pad = model.decoder.dictionary.pad()

    def run(m: nn.Module, batch: dict) -> torch.Tensor:  # [b, 2]
        tokens = batch["target"].ne(pad).sum(1).double()
        return torch.stack([translation_loss(m, batch).double().cpu(), tokens], 1)

    masked = [c for c in configs if c != UNMASKED]
    base, outs = single_layer_sweep(
        model, [batch for _, batch in indexed], run=run, configs=masked, progress=progress, removal=removal
    )
    order = np.argsort(np.concatenate([idx for idx, _ in indexed]))  # batch order -> pairs order
    for config in configs:
        yield config, (base if config == UNMASKED else outs[config]).numpy()[order]


def translation_likelihood_scorer(
    pairs: Sequence, max_tokens: int = 2000, configs_per_pass: int = 1
) -> Callable[[nn.Module], float]:
    """``score(model)``: the mean log-likelihood per reference token (nats; higher is better) of
    ``pairs``, teacher-forced; ``score.many(model, specs)`` under each head spec, as
    ``translation_scorer``'s."""

    def score(model: nn.Module) -> float:
        with ledger.entry("teacher-forced scoring", "translation likelihood", model=model, examples=len(pairs)):
            return log_likelihood(translation_nll(model, pairs, max_tokens).sum(0))

    def rows(model: nn.Module, specs: Sequence[dict]) -> list[np.ndarray]:
        with ledger.entry(
            "teacher-forced scoring", "translation likelihood", model=model, examples=len(pairs), configs=len(specs)
        ) as timed:
            return _kept_outputs(
                kept,
                model,
                specs=specs,
                timed=timed,
                compute=lambda missing: (
                    nll
                    for _, nll in masked_translation_nll(
                        model,
                        pairs,
                        configs=missing,
                        configs_per_pass=configs_per_pass,
                        progress=False,
                        max_tokens=max_tokens,
                    )
                ),
            )

    kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {heads: translation_nll rows}
    score.many = lambda model, specs: [log_likelihood(nll.sum(0)) for nll in rows(model, specs)]
    score.stats = rows
    score.from_stats = log_likelihood
    score.examples = len(pairs)
    return score


def translation_loss(model: nn.Module, batch: dict) -> torch.Tensor:
    """Summed token cross-entropy of each reference sentence, [B] (nats)."""
    from .translation_model import sentence_losses

    return sentence_losses(model, batch, label_smoothing=0.0)


def classifier_importance(
    model: nn.Module, tokenizer, examples: Sequence, max_length: int = 64, **kwargs
) -> dict[str, torch.Tensor]:
    """I_h of a classifier on ``examples`` (cross-entropy of the gold label); ``kwargs`` go to
    ``head_importance`` (e.g. ``gates=`` to re-estimate with some heads masked)."""
    from ..heads.importance import head_importance

    return head_importance(
        model,
        classifier_loss_batches(tokenizer, examples, max_length),
        loss_fn=classifier_loss,
        progress=False,
        **kwargs,
    )


def translation_importance(model: nn.Module, pairs: Sequence, **kwargs) -> dict[str, torch.Tensor]:
    """I_h of a translation model on sentence ``pairs`` (summed token cross-entropy)."""
    from ..heads.importance import head_importance

    return head_importance(
        model, translation_loss_batches(model, pairs), loss_fn=translation_loss, progress=False, **kwargs
    )
