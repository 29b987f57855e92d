"""Tasks made from the verse-aligned Bible (``bible.py``): real English and French text.

Translation, in the WMT En-Fr role (the paper's §3 to §5):

* source: the World English Bible (``web``); reference: Louis Segond 1910 (``segond``);
* ``train`` and ``valid``, and two disjoint in-domain test sets, ``test13`` (newstest2013's
  role: choosing heads) and ``test14`` (newstest2014's: reporting), each of whole chapters
  unseen in training (``bible.chapter_splits``);
* ``mtnt`` (MTNT's role, out of domain): chapters of their own with another English version as
  the source, against the same French; the shift is in the input, as MTNT's noisy Reddit
  English is for a model trained on news. By default the King James Version of 1611 (``kjv``:
  *thee*, *hath*, *saith*, old spelling and word order), which a model trained on modern
  English translates worse, as models trained on news do MTNT. Basic English (``basic``, 1949,
  850 words) is the other choice; it turned out easier than the in-domain source (BLEU 6.8
  against 5.1 for a probe model), so it does not play MTNT's role;
* each pair's ``oracle`` is a second human translation, Ostervald 1996: BLEU(oracle, ref) is
  what another translator scores against Segond, a ceiling for single-reference BLEU.

Sentences are Moses-tokenised (sacremoses, as fairseq's ``moses`` encoder) and split with a joint
BPE (subword-nmt) learned on the training pairs only. Tokenised BLEU merges BPE back and scores
Moses tokens; detokenized BLEU scores against each held-out pair's ``raw_ref``, the verse as the
corpus prints it (``heads.metrics.BleuDefinition``). Verses longer than ``max_words`` words in any version
used are left out, to bound sequence length on a CPU.

Paraphrase, in the MRPC role (Appendix B): the same verse in two English versions (``web`` and
``basic``) is a paraphrase (label 1); a verse against a different verse close by in the same
chapter (up to three verses away, other version) is not (label 0). Half of each split is each.
"""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Mapping, Sequence

from . import bible
from .appendix_tasks import Example
from .translation_task import Pair

SOURCE, REFERENCE, SHIFTED, SECOND_FRENCH = "web", "segond", "basic", "ostervald"
OUT_OF_DOMAIN = "kjv"  # the source of ``mtnt``
_OLD_ENGLISH = ("kjv", "kjv2000")  # KJV 2000 revises the KJV's words: it never trains when the KJV is out of domain
_TRANSLATION_SPLITS = ("train", "valid", "test13", "test14", "mtnt")
_PARAPHRASE_SPLITS = ("train", "valid")


def _check(sizes: Mapping[str, int], names: Sequence[str]) -> None:
    unknown = set(sizes) - set(names)
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)}; the splits are {tuple(names)}")


def _short(verses: Sequence[bible.Verse], max_words: int) -> list[bible.Verse]:
    return [v for v in verses if all(len(t.split()) <= max_words for t in v.texts.values())]


def _distinct(verses: Sequence[bible.Verse]) -> list[bible.Verse]:
    """The first verse of each English text: a verse repeated word for word elsewhere (Genesis
    2:24 in Matthew and Mark, the refrains of the Psalms) could otherwise sit in a test set and
    in training at once."""
    seen: set[str] = set()
    out = []
    for verse in verses:
        if verse.texts[SOURCE] not in seen:
            seen.add(verse.texts[SOURCE])
            out.append(verse)
    return out


class Subwords:
    """Moses tokenisation per language, then one joint BPE learned from training text."""

    def __init__(self, train_lines: Sequence[str], merges: int):
        from subword_nmt.apply_bpe import BPE
        from subword_nmt.learn_bpe import learn_bpe

        codes = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()):  # learn_bpe draws a progress bar per call
            learn_bpe(io.StringIO("\n".join(train_lines) + "\n"), codes, merges, min_frequency=2)
        codes.seek(0)
        self._bpe = BPE(codes)

    @staticmethod
    def tokenize(texts: Sequence[str], lang: str) -> list[str]:
        from sacremoses import MosesTokenizer

        tok = MosesTokenizer(lang=lang)
        return [tok.tokenize(t, return_str=True, escape=False, aggressive_dash_splits=True) for t in texts]

    def encode(self, tokenized: Sequence[str]) -> list[str]:
        return [self._bpe.process_line(line) for line in tokenized]


def translation_splits(
    sizes: Mapping[str, int],
    seed: int = 0,
    *,
    merges: int = 8000,
    max_words: int = 30,
    shifted: str = OUT_OF_DOMAIN,
    train_max_words: int | None = None,
    train_sources: Sequence[str] = (SOURCE,),
    train_references: Sequence[str] = (REFERENCE,),
) -> dict[str, list[Pair]]:
    """``{split: [Pair]}`` for the splits in ``sizes`` (names in ``_TRANSLATION_SPLITS``), with
    ``src``, ``ref`` and ``oracle`` as BPE-encoded Moses tokens, and ``raw_ref``, the reference
    verse as the corpus prints it (for detokenized BLEU); deterministic by ``seed``.

    The held-out splits take verses of at most ``max_words`` words in every version they read.
    By default ``train`` draws from the same verses, as pairs ``SOURCE`` -> ``REFERENCE``. With
    ``train_max_words`` or other training versions, ``train`` is built by ``_training_verses``
    instead: every verse of at most ``train_max_words`` words in the chapters no held-out split
    took, one pair per verse for each version in ``train_sources`` times each in
    ``train_references`` (size 0: every such verse; otherwise that many verses)."""
    _check(sizes, _TRANSLATION_SPLITS)
    expanded = (
        train_max_words is not None or tuple(train_sources) != (SOURCE,) or tuple(train_references) != (REFERENCE,)
    )
    verses = _distinct(_short(bible.read_verses([SOURCE, shifted, REFERENCE, SECOND_FRENCH]), max_words))
    pool = (
        _training_verses(train_max_words or max_words, train_sources, train_references, shifted)
        if expanded and "train" in sizes
        else None
    )
    splits = bible.chapter_splits(verses, sizes, seed, train_verses=pool)
    held_out = {s: vs for s, vs in splits.items() if s != "train"}
    en = {
        s: Subwords.tokenize([v.texts[shifted if s == "mtnt" else SOURCE] for v in vs], "en")
        for s, vs in held_out.items()
    }
    fr = {s: Subwords.tokenize([v.texts[REFERENCE] for v in vs], "fr") for s, vs in held_out.items()}
    oracle = {s: Subwords.tokenize([v.texts[SECOND_FRENCH] for v in vs], "fr") for s, vs in held_out.items()}
    if "train" in splits and expanded:
        # a refrain repeated word for word in another chapter must not reach training
        seen = {t for vs in held_out.values() for v in vs for t in v.texts.values()}
        train = [v for v in splits["train"] if not seen & set(v.texts.values())]
        combos = [(a, b) for a in train_sources for b in train_references]
        en["train"] = Subwords.tokenize([v.texts[a] for v in train for a, _ in combos], "en")
        fr["train"] = Subwords.tokenize([v.texts[b] for v in train for _, b in combos], "fr")
        oracle["train"] = []  # the second translator never reaches training
    elif "train" in splits:
        en["train"] = Subwords.tokenize([v.texts[SOURCE] for v in splits["train"]], "en")
        fr["train"] = Subwords.tokenize([v.texts[REFERENCE] for v in splits["train"]], "fr")
        oracle["train"] = Subwords.tokenize([v.texts[SECOND_FRENCH] for v in splits["train"]], "fr")
    subwords = Subwords(en.get("train", []) + fr.get("train", []), merges)
    raw = {s: [v.texts[REFERENCE].strip() for v in vs] for s, vs in held_out.items()}
    out = {}
    for s in splits:
        second = subwords.encode(oracle[s]) or [""] * len(en[s])
        printed = raw.get(s, [""] * len(en[s]))  # training pairs keep only what the model reads
        encoded = zip(subwords.encode(en[s]), subwords.encode(fr[s]), second, printed)
        out[s] = [Pair(a, b, c, d) for a, b, c, d in encoded]
    return out


def _training_verses(
    max_words: int, sources: Sequence[str], references: Sequence[str], shifted: str
) -> list[bible.Verse]:
    """Verses of at most ``max_words`` words in each of ``sources`` and ``references``. The
    out-of-domain source (with its revision, for the KJV) and the second translator never train."""
    banned = {shifted, SECOND_FRENCH, *(_OLD_ENGLISH if shifted in _OLD_ENGLISH else ())}
    used = list(dict.fromkeys([*sources, *references]))
    if banned & set(used):
        raise ValueError(
            f"training versions {sorted(banned & set(used))} are held out: the out-of-domain source "
            f"({shifted}{' and its revision' if shifted in _OLD_ENGLISH else ''}) and the second "
            f"translator ({SECOND_FRENCH}) never train; pick from {sorted(set(bible.VERSIONS) - banned)}"
        )
    return _short(bible.read_verses(used), max_words)


def paraphrase_splits(sizes: Mapping[str, int], seed: int = 0, max_words: int = 30) -> dict[str, list[Example]]:
    """``{split: [Example]}`` (``text``, ``text_pair``, ``label``; ``kind`` is ``same-verse`` or
    ``nearby-verse``), half of each split paraphrases; deterministic by ``seed``."""
    _check(sizes, _PARAPHRASE_SPLITS)
    verses = _distinct(_short(bible.read_verses([SOURCE, SHIFTED]), max_words))
    by_key = {v.key: v for v in verses}
    splits = bible.chapter_splits(verses, sizes, seed)
    rng = random.Random(f"paraphrase/{seed}")
    out = {}
    for split, chosen in splits.items():
        examples = []
        for i, verse in enumerate(chosen):
            flip = rng.random() < 0.5  # which version comes first
            a, b = (SOURCE, SHIFTED) if flip else (SHIFTED, SOURCE)
            if i % 2 == 0:
                examples.append(Example(verse.texts[a], 1, verse.texts[b], "same-verse"))
                continue
            book, chapter, number = verse.key
            near = [by_key[k] for d in (-3, -2, -1, 1, 2, 3) if (k := (book, chapter, number + d)) in by_key]
            if not near:  # a chapter of one usable verse: a paraphrase keeps the halves within one
                examples.append(Example(verse.texts[a], 1, verse.texts[b], "same-verse"))
                continue
            examples.append(Example(verse.texts[a], 0, rng.choice(near).texts[b], "nearby-verse"))
        out[split] = examples
    return out
