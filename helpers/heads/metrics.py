"""The paper's scores: accuracy (MNLI, SST-2), Matthews correlation (CoLA), F1 (MRPC), BLEU."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch


def _as_lists(pred, gold) -> tuple[list[int], list[int]]:
    pred = pred.tolist() if isinstance(pred, torch.Tensor) else list(pred)
    gold = gold.tolist() if isinstance(gold, torch.Tensor) else list(gold)
    if len(pred) != len(gold):
        raise ValueError(f"{len(pred)} predictions for {len(gold)} labels")
    return pred, gold


def accuracy(pred, gold) -> float:
    pred, gold = _as_lists(pred, gold)
    return sum(p == g for p, g in zip(pred, gold)) / len(gold)


def _confusion(pred, gold) -> tuple[int, int, int, int]:
    pred, gold = _as_lists(pred, gold)
    tp = sum(p == 1 and g == 1 for p, g in zip(pred, gold))
    tn = sum(p == 0 and g == 0 for p, g in zip(pred, gold))
    fp = sum(p == 1 and g == 0 for p, g in zip(pred, gold))
    fn = sum(p == 0 and g == 1 for p, g in zip(pred, gold))
    return tp, tn, fp, fn


def matthews(pred, gold) -> float:
    """Matthews correlation of binary labels; 0 when a row or column of the confusion is empty."""
    tp, tn, fp, fn = _confusion(pred, gold)
    denom = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denom if denom else 0.0


def f1(pred, gold) -> float:
    """F1 of the positive class (label 1), as GLUE reports for MRPC."""
    tp, _, fp, fn = _confusion(pred, gold)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


METRICS = {"accuracy": accuracy, "matthews": matthews, "f1": f1}


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
    ``bleu`` and ``significance.bleu_stats`` with that tokenizer then compute the definition's
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
