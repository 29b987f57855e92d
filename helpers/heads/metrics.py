"""The paper's scores, each defined once: per-example statistics, and a score of their sums.

A score of a set of examples is computed from statistics summed over it (Koehn's paired
bootstrap resamples those rows, ``significance.paired_bootstrap``). ``METRICS`` holds the
classifier metrics and the likelihood as ``Metric(stats, score)``; ``metric(pred, gold)`` is the
score of the whole set, the same arithmetic as every resample's:

==========  ==================================================  ==============================
metric      per-example statistics ``stats``                    ``score`` of their sums
==========  ==================================================  ==============================
accuracy    ``[N, 2]``: (correct, 1) (MNLI, SST-2)               correct / examples
matthews    ``[N, 4]``: one-hot (tp, tn, fp, fn) (CoLA)          Matthews correlation
f1          ``[N, 4]``: the same (MRPC)                          F1 of the positive class
likelihood  ``[N, 2]``: (negative log-likelihood, units)         minus NLL per unit (nats)
bleu        ``[N, 10]``: sacreBLEU's n-gram counts (WMT, IWSLT)  corpus BLEU (``bleu_stats``)
==========  ==================================================  ==============================

BLEU's statistics depend on how its text is tokenized (``BleuDefinition``), so its two
functions take the tokenizer: ``bleu_stats`` and ``bleu_from_stats``; ``bleu`` scores a corpus
and returns sacreBLEU's signature.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

Scorer = Callable[[np.ndarray], float]  # summed statistics [k] -> score


def _as_arrays(pred, gold) -> tuple[np.ndarray, np.ndarray]:
    pred = pred.detach().cpu().numpy() if isinstance(pred, torch.Tensor) else np.asarray(pred)
    gold = gold.detach().cpu().numpy() if isinstance(gold, torch.Tensor) else np.asarray(gold)
    if len(pred) != len(gold):
        raise ValueError(f"{len(pred)} predictions for {len(gold)} labels")
    return pred, gold


def accuracy_stats(pred: Sequence[int], gold: Sequence[int]) -> np.ndarray:
    """[N, 2]: (correct, 1) per example."""
    pred, gold = _as_arrays(pred, gold)
    correct = pred == gold
    return np.stack([correct, np.ones_like(correct)], 1).astype(np.float64)


def accuracy_from_stats(sums: np.ndarray) -> float:
    return float(sums[0] / sums[1])


def confusion_stats(pred: Sequence[int], gold: Sequence[int]) -> np.ndarray:
    """[N, 4]: one-hot (true positive, true negative, false positive, false negative) per example
    of binary labels (label 1 is positive); their sum is the confusion matrix."""
    pred, gold = _as_arrays(pred, gold)
    p, g = pred == 1, gold == 1
    return np.stack([p & g, ~p & ~g, p & ~g, ~p & g], 1).astype(np.float64)


def matthews_from_stats(sums: np.ndarray) -> float:
    """Matthews correlation of summed ``confusion_stats``; 0 where a row or column of the
    confusion is empty."""
    tp, tn, fp, fn = (float(x) for x in sums)
    denom = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denom) if denom else 0.0


def f1_from_stats(sums: np.ndarray) -> float:
    """F1 of the positive class (label 1) from summed ``confusion_stats``, as GLUE reports for MRPC."""
    tp, _, fp, fn = (float(x) for x in sums)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def log_likelihood(sums: np.ndarray) -> float:
    """Mean log-likelihood per unit (nats) from summed ``[negative log-likelihood, units]``
    statistics ``[2]`` (units: predicted tokens of a text, or 1 per classified example): higher
    is better."""
    return -float(sums[0] / sums[1])


@dataclass(frozen=True)
class Metric:
    """A score defined by per-example statistics ``stats(pred, gold) -> [N, k]`` and ``score``,
    the score of their sums ``[k]`` over a set (higher is better). Called as ``metric(pred,
    gold)``, the score of the whole set. ``stats`` is None where the statistics come from the
    model itself (the likelihood's, e.g. ``causal_lm.token_nll``)."""

    name: str
    stats: Callable[[Sequence[int], Sequence[int]], np.ndarray] | None
    score: Scorer

    def __call__(self, pred, gold) -> float:
        if self.stats is None:
            raise TypeError(f"{self.name} is scored from the model's statistics, not from predictions")
        return self.score(self.stats(pred, gold).sum(0))


METRICS = {
    m.name: m
    for m in (
        Metric("accuracy", accuracy_stats, accuracy_from_stats),
        Metric("matthews", confusion_stats, matthews_from_stats),
        Metric("f1", confusion_stats, f1_from_stats),
    )
}
LIKELIHOOD = Metric("likelihood", None, log_likelihood)
accuracy, matthews, f1 = METRICS["accuracy"], METRICS["matthews"], METRICS["f1"]


def merge_bpe(text: str) -> str:
    """``text`` with subword-nmt's ``@@`` continuation markers joined (``"chat@@ on" -> "chaton"``),
    as fairseq's ``--remove-bpe``; text without them is returned unchanged."""
    return (text + " ").replace("@@ ", "").rstrip() if "@@" in text else text


# The authors' scripts compute BLEU in two ways. ``wmt_ablation.sh``, which printed
# Tables 1, 2 and 5, removed BPE, detokenized with Moses and scored with sacreBLEU's defaults (its
# 13a tokenizer) against the raw reference: DETOKENIZED. ``prune.py`` (Figures 3 to 6) merged BPE
# and scored the tokenized text as it is (``tokenize="none"``): TOKENIZED.
TOKENIZED, DETOKENIZED = "tokenized", "detokenized"
BLEU_TOKENIZERS = {TOKENIZED: "none", DETOKENIZED: "13a"}


@functools.lru_cache(maxsize=8)
def _detokenizer(lang: str):
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def detokenize(text: str, lang: str) -> str:
    """``text`` (Moses tokens, BPE markers allowed) with BPE merged and Moses' detokenizer for
    ``lang`` applied, as fairseq's ``moses`` encoder decodes (``@-@`` dash splits joined too)."""
    return _detokenizer(lang).detokenize(merge_bpe(text).split())


@dataclass(frozen=True)
class BleuDefinition:
    """How a chapter's BLEU is computed: ``name`` ``TOKENIZED`` or ``DETOKENIZED`` (above), and
    ``lang``, the language the model writes (for the detokenizer). ``hypotheses(model outputs)``
    and ``references(pairs)`` give the texts to score with sacreBLEU's tokenizer ``tokenize``;
    ``bleu`` and ``bleu_stats`` with that tokenizer then compute the definition's
    BLEU. A reference is a pair's ``raw_ref`` (as published) when it has one, else its tokenized
    ``ref`` detokenized the same way as the hypotheses."""

    name: str = TOKENIZED
    lang: str = "fr"

    def __post_init__(self):
        if self.name not in BLEU_TOKENIZERS:
            raise ValueError(f"unknown BLEU definition {self.name!r}; use one of {sorted(BLEU_TOKENIZERS)}")

    @property
    def tokenize(self) -> str:
        return BLEU_TOKENIZERS[self.name]

    def hypotheses(self, outputs: Sequence[str]) -> list[str]:
        if self.name == TOKENIZED:
            return list(outputs)
        return [detokenize(h, self.lang) for h in outputs]

    def references(self, pairs: Sequence) -> list[str]:
        if self.name == TOKENIZED:
            return [p.ref for p in pairs]
        return [getattr(p, "raw_ref", "") or detokenize(p.ref, self.lang) for p in pairs]

    def score(self, outputs: Sequence[str], pairs: Sequence) -> tuple[float, str]:
        """Corpus BLEU of ``outputs`` (model outputs, one per pair) against ``pairs``, and its
        sacreBLEU signature."""
        return bleu(self.hypotheses(outputs), self.references(pairs), self.tokenize)

    def signature(self) -> str:
        """``"<name>: <sacreBLEU signature>"`` (sacreBLEU writes one only after a score)."""
        return f"{self.name}: {bleu(['x'], ['x'], self.tokenize)[1]}"


def bleu(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "none") -> tuple[float, str]:
    """Corpus BLEU (sacrebleu) and its signature. ``tokenize="none"`` scores already tokenised
    text as it is, i.e. tokenised BLEU, as the authors' ``prune.py`` scored its pruning curves
    (``sacrebleu.corpus_bleu(..., tokenize="none")``).
    BPE markers are merged first on both sides (``merge_bpe``): models and data keep sentences
    as the subword tokens the model reads, and BLEU counts words."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    metric = sacrebleu.BLEU(tokenize=tokenize, force=True)
    score = metric.corpus_score([merge_bpe(h) for h in hypotheses], [[merge_bpe(r) for r in references]])
    return score.score, str(metric.get_signature())


def bleu_stats(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "none") -> np.ndarray:
    """[N, 10] sacrebleu statistics per sentence: hypothesis and reference length, then matches and
    totals of 1- to 4-grams. BPE markers are merged first, as in ``bleu``."""
    import sacrebleu

    metric = sacrebleu.BLEU(tokenize=tokenize, force=True)
    return np.array(
        metric._extract_corpus_statistics([merge_bpe(h) for h in hypotheses], [[merge_bpe(r) for r in references]]),
        dtype=np.float64,
    )


def bleu_from_stats(sums: np.ndarray, tokenize: str = "none") -> float:
    """Corpus BLEU of summed ``bleu_stats``, exactly as sacrebleu computes it."""
    import sacrebleu

    return sacrebleu.BLEU(tokenize=tokenize, force=True)._compute_score_from_stats([int(x) for x in sums]).score
