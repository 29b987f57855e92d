"""Generated stand-ins for the paper's Appendix B tasks (GLUE CoLA, SST-2, MRPC).

* ``acceptability`` (CoLA role, Matthews correlation): sentences of the translation task's
  English grammar (label 1) and the same sentences broken by one rule (label 0): subject-verb
  agreement, noun number after a numeral or ``a``, an adjective after its noun, ``not``
  without ``do``.
* ``sentiment`` (SST-2 role, accuracy): reviews whose polarity comes from an evaluative
  adjective, flipped by ``not``/``never``/``hardly``, and decided by the main clause of
  ``X, but Y`` / ``although X, Y`` / ``Y, although X``; validation adds unseen adjectives.
* ``paraphrase`` (MRPC role, F1 of the paraphrase class): sentence pairs with the same tree
  told differently (fronted phrase or clause, synonyms) against pairs whose meaning changed
  (roles swapped, negation, another noun, other number), also told differently.

Each has splits ``train`` and ``valid``; no sentence (or first sentence of a pair) is in both.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass

from .lexicon import ADJECTIVES, VERBS
from .splits import draw_splits
from .translation_task import NOUNS, Grammar, Sentence, english, english_np

SPLITS = ("train", "valid")
TASKS = ("acceptability", "sentiment", "paraphrase")


@dataclass(frozen=True)
class Example:
    text: str
    label: int
    text_pair: str | None = None
    kind: str = ""  # how the example was made (for analysis and tests)


# ---- acceptability ----------------------------------------------------------------------------
_VERB_FORMS = {v.en: v.en_base for v in VERBS} | {v.en_base: v.en for v in VERBS}
_NOUN_FORMS = {n.en: n.en_pl for n in NOUNS} | {n.en_pl: n.en for n in NOUNS if n.en_pl != n.en}
_ADJECTIVES = {a.en for a in ADJECTIVES}
_NOUN_WORDS = set(_NOUN_FORMS) | {n.en for n in NOUNS}


def _break(sentence: str, rng: random.Random) -> tuple[str, str] | None:
    """One rule broken, or None when the chosen rule has nowhere to apply."""
    words = sentence.split()
    kind = rng.choice(["agreement", "number", "adjective-order", "bare-not"])
    spots: list[int]
    if kind == "agreement":
        spots = [i for i, w in enumerate(words) if w in _VERB_FORMS and words[i - 1] not in ("not",)]
        if not spots:
            return None
        i = rng.choice(spots)
        words[i] = _VERB_FORMS[words[i]]
    elif kind == "number":
        spots = [i for i, w in enumerate(words) if w in _NOUN_FORMS and i and words[i - 1] in ("a", "an", "two")]
        if not spots:
            return None
        i = rng.choice(spots)
        words[i] = _NOUN_FORMS[words[i]]
    elif kind == "adjective-order":
        spots = [i for i, w in enumerate(words[:-1]) if w in _ADJECTIVES and words[i + 1] in _NOUN_WORDS]
        if not spots:
            return None
        i = rng.choice(spots)
        words[i], words[i + 1] = words[i + 1], words[i]
    else:
        spots = [i for i, w in enumerate(words) if w in ("does", "do") and words[i + 1] == "not"]
        if not spots:
            return None
        i = rng.choice(spots)
        verb = words[i + 2]
        words[i : i + 3] = ["not", _VERB_FORMS[verb] if words[i] == "does" else verb]
    return " ".join(words), kind


def _acceptability(rng: random.Random, split: str) -> Example:
    sentence = english(Grammar(rng).sentence())
    if rng.random() < 0.5:
        return Example(sentence, 1, kind="grammatical")
    while True:
        broken = _break(sentence, rng)
        if broken is not None:
            return Example(broken[0], 0, kind=broken[1])


# ---- sentiment --------------------------------------------------------------------------------
POSITIVE = [
    "good",
    "great",
    "wonderful",
    "lovely",
    "excellent",
    "charming",
    "moving",
    "clever",
    "superb",
    "delightful",
    "gripping",
    "brilliant",
    "touching",
    "fresh",
    "elegant",
]
NEGATIVE = [
    "bad",
    "boring",
    "awful",
    "dull",
    "terrible",
    "weak",
    "silly",
    "clumsy",
    "tedious",
    "bland",
    "messy",
    "dreadful",
    "shallow",
    "sloppy",
    "tiresome",
]
_THINGS = ["film", "story", "acting", "music", "ending", "plot", "book", "show", "meal", "service"]
# Training reviews use two thirds of the evaluative adjectives; validation reviews may use any,
# so part of the validation set rests on what the pretrained encoder knows of unseen words (as
# SST-2's validation set has words its training set lacks).
SEEN = set(POSITIVE[:10] + NEGATIVE[:10])


def _opinion(rng: random.Random, seen_only: bool) -> tuple[list[str], int]:
    """A clause and its polarity (1 positive, 0 negative)."""
    polarity = rng.random() < 0.5
    adj = rng.choice([a for a in (POSITIVE if polarity else NEGATIVE) if a in SEEN or not seen_only])
    words = ["the", rng.choice(_THINGS), "was"]
    if rng.random() < 0.3:
        words.append(rng.choice(["not", "never", "hardly"]))
        polarity = not polarity
    if rng.random() < 0.3:
        words.append(rng.choice(["very", "really", "quite"]))
    return words + [adj], int(polarity)


def _sentiment(rng: random.Random, split: str) -> Example:
    """The label is the polarity of the main clause: after ``but``, or the one ``although`` does
    not introduce, wherever it stands."""
    first, label = _opinion(rng, split == "train")
    shape = rng.choice(["single", "single", "but", "although-first", "although-last"])
    if shape == "single":
        return Example(" ".join(first + ["."]), label, kind=shape)
    second, label2 = _opinion(rng, split == "train")
    if shape == "but":
        return Example(" ".join(first + [",", "but"] + second + ["."]), label2, kind=shape)
    if shape == "although-first":
        return Example(" ".join(["although"] + first + [","] + second + ["."]), label2, kind=shape)
    return Example(" ".join(first + [",", "although"] + second + ["."]), label, kind=shape)


# ---- paraphrase -------------------------------------------------------------------------------
SYNONYMS = {
    "big": "large",
    "small": "little",
    "happy": "glad",
    "sick": "ill",
    "child": "kid",
    "children": "kids",
    "sees": "spots",
    "see": "spot",
    "likes": "enjoys",
    "like": "enjoy",
    "near": "close to",
    "tired": "sleepy",
    "pretty": "lovely",
}


def _retell(s: Sentence, rng: random.Random) -> str:
    """The same meaning in other words: a fronted phrase or clause, or synonyms."""
    s = copy.deepcopy(s)
    front = []
    if s.sub and rng.random() < 0.6:
        conj, clause = s.sub
        s.sub = None
        front = english(Sentence(clause)).removesuffix(" .").split()
        front = [conj] + front + [","]
    elif s.pp and rng.random() < 0.6:
        prep, np = s.pp
        s.pp = None
        front = [prep] + english_np(np) + [","]
    words = front + english(s).split()
    out = [SYNONYMS.get(w, w) if rng.random() < 0.7 else w for w in words]
    return " ".join(out)


def _change_meaning(s: Sentence, rng: random.Random) -> tuple[Sentence, str] | None:
    s = copy.deepcopy(s)
    c = s.main
    kind = rng.choice(["swap", "negate", "noun", "number"])
    if kind == "swap":
        if c.obj is None or c.obj.noun == c.subj.noun:
            return None
        c.subj, c.obj = c.obj, c.subj
    elif kind == "negate":
        c.negated = not c.negated
    elif kind == "noun":
        c.subj.noun = rng.choice([n for n in NOUNS if n != c.subj.noun])
    else:
        c.subj.det = {"the": "the_pl", "the_pl": "the", "a": "two_pl", "two_pl": "a"}.get(c.subj.det, "")
        if not c.subj.det:
            return None
    return s, kind


def _paraphrase(rng: random.Random, split: str) -> Example:
    tree = Grammar(rng).sentence()
    if rng.random() < 0.5:
        return Example(english(tree), 1, _retell(tree, rng), kind="same")
    while True:
        changed = _change_meaning(tree, rng)
        if changed is not None:
            return Example(english(tree), 0, _retell(changed[0], rng), kind=changed[1])


# ---- splits ----------------------------------------------------------------------------------
_MAKERS = {"acceptability": _acceptability, "sentiment": _sentiment, "paraphrase": _paraphrase}


def generate(task: str, sizes: dict[str, int], seed: int = 0) -> dict[str, list[Example]]:
    """``sizes[split]`` examples of ``task`` per split; deterministic by seed; no text (first
    text of a pair) occurs twice."""
    if task not in _MAKERS:
        raise ValueError(f"unknown task {task!r}; the tasks are {TASKS}")
    rng = random.Random(f"{task}/{seed}")
    return draw_splits(sizes, SPLITS, draw=lambda split: _MAKERS[task](rng, split), across=lambda e: e.text)
