"""A generated 3-way sentence-pair inference task, standing in for MultiNLI.

Every premise is a simple clause: a quantified subject (``the``, ``a``, ``some``, ``every``,
``no``), an optional adjective, a verb (maybe negated) and maybe an object. The hypothesis is
the premise after one edit, and the label follows from natural-logic monotonicity:

* ``a``/``some``/``the`` are upward monotone in their noun and in the predicate; ``every`` is
  downward in its noun and upward in the predicate; ``no`` is downward in both; ``not`` flips
  the predicate.
* Making an upward position more general (poodle -> dog, drop an adjective, chases -> follows)
  or a downward position more specific entails the premise; the other way round is neutral.
* Swapping subject and object is neutral; negating a clause about ``the`` X contradicts it, while
  negating one about ``a`` X does not (another X may be meant); ``every`` -> ``some``
  entails, ``some`` -> ``every`` is neutral, anything -> ``no`` contradicts.

So word overlap alone cannot solve it: a swap keeps every word, ``not`` may appear on both
sides, and the same edit entails under ``some`` and is neutral under ``every``.

Splits: ``train`` and ``matched`` use the everyday field (animals, people) and plain
templates; ``mismatched`` uses the work field (doctors, vehicles), whose words never occur in
training, and other templates (adjectives as relative clauses, clefts, a fronted place).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from .lexicon import ADJECTIVES, Noun, Verb, field_nouns, field_verbs, is_hyponym, noun
from .splits import draw_splits

LABELS = ("entailment", "neutral", "contradiction")
SPLITS = ("train", "matched", "mismatched")
_QUANTIFIERS = ("the", "a", "some", "every", "no")


@dataclass(frozen=True)
class Example:
    premise: str
    hypothesis: str
    label: int  # index into LABELS
    edit: str  # which edit produced the hypothesis (for analysis and tests)


@dataclass(frozen=True)
class Clause:
    q: str
    subj: Noun
    adj: str | None
    verb: Verb
    obj: Noun | None
    negated: bool = False


@dataclass(frozen=True)
class _Field:
    subjects: list[Noun]
    objects: list[Noun]
    verbs: list[Verb]
    templates: tuple[str, ...]


_FIELDS = {
    "everyday": _Field(
        field_nouns("animals", "home"), field_nouns("animals", "home"), field_verbs("everyday"), ("plain", "place")
    ),
    "work": _Field(
        [n for n in field_nouns("work") if is_hyponym(n.en, "worker")],
        field_nouns("work"),
        field_verbs("work"),
        ("relative", "cleft", "fronted"),
    ),
}


# ---- realisation ------------------------------------------------------------------------------
def _plural(c: Clause) -> bool:
    return c.q == "some"


def _subject(c: Clause, template: str) -> list[str]:
    n = c.subj.en_pl if _plural(c) else c.subj.en
    det = "an" if c.q == "a" and (c.adj or n)[0] in "aeiou" else c.q
    if c.adj is None:
        return [det, n]
    if template == "relative":
        return [det, n, "that", "are" if _plural(c) else "is", c.adj]
    return [det, c.adj, n]


def _predicate(c: Clause) -> list[str]:
    plural = _plural(c)
    if c.negated:
        words = ["do" if plural else "does", "not", c.verb.en_base]
    else:
        words = [c.verb.en_base if plural else c.verb.en]
    if c.obj is not None:
        words += ["the", c.obj.en]
    return words


def _realise(c: Clause, template: str) -> str:
    """English text of ``c`` in one of the templates: plain, place, relative, cleft, fronted."""
    if template == "cleft" and c.q == "the":
        words = ["it", "is"] + _subject(c, template) + ["that"] + _predicate(c)
    else:
        words = _subject(c, template) + _predicate(c)
    if template == "place":
        words += ["in", "the", "garden"]
    if template == "fronted":
        words = ["at", "the", "hospital", ","] + words
    return " ".join(words + ["."])


# ---- monotonicity ----------------------------------------------------------------------------
def _subject_upward(q: str) -> bool:
    return q in ("the", "a", "some")


def _predicate_upward(c: Clause) -> bool:
    return (c.q != "no") != c.negated


def _entails_if(upward_position: bool, generalises: bool) -> int:
    """Label of replacing one word: entailment when the change follows the position's direction."""
    return LABELS.index("entailment") if upward_position == generalises else LABELS.index("neutral")


# ---- edits: each returns (hypothesis clause, label) or None when it does not apply -----------
def _children(n: Noun, pool: list[Noun]) -> list[Noun]:
    return [m for m in pool if m.hypernym == n.en]


def _related(n: Noun, pool: list[Noun], rng: random.Random, general: bool) -> Noun | None:
    """The hypernym of ``n`` (general) or one of its hyponyms in ``pool``; None if there is none."""
    if general:
        return noun(n.hypernym) if n.hypernym else None
    kids = _children(n, pool)
    return rng.choice(kids) if kids else None


def _edit_subject_noun(c: Clause, f: _Field, rng: random.Random, general: bool):
    new = _related(c.subj, f.subjects, rng, general)
    if new is None:
        return None
    return replace(c, subj=new), _entails_if(_subject_upward(c.q), general)


def _edit_adjective(c: Clause, f: _Field, rng: random.Random, general: bool):
    if general == (c.adj is None):  # drop needs an adjective, add needs none
        return None
    new = None if general else rng.choice(ADJECTIVES).en
    return replace(c, adj=new), _entails_if(_subject_upward(c.q), general)


def _edit_object(c: Clause, f: _Field, rng: random.Random, general: bool):
    new = _related(c.obj, f.objects, rng, general) if c.obj is not None else None
    if new is None:
        return None
    return replace(c, obj=new), _entails_if(_predicate_upward(c), general)


def _edit_verb(c: Clause, f: _Field, rng: random.Random, general: bool):
    if general:
        parents = [v for v in f.verbs if v.en_base == c.verb.hypernym]
        if not parents:
            return None
        new = parents[0]
    else:
        kids = [v for v in f.verbs if v.hypernym == c.verb.en_base]
        if not kids:
            return None
        new = rng.choice(kids)
    return replace(c, verb=new), _entails_if(_predicate_upward(c), general)


def _edit_sibling(c: Clause, f: _Field, rng: random.Random):
    others = [n for n in f.subjects if n.hypernym == c.subj.hypernym and n != c.subj and n.hypernym]
    if not others:
        return None
    return replace(c, subj=rng.choice(others)), LABELS.index("neutral")


def _edit_swap(c: Clause, f: _Field, rng: random.Random):
    if c.q != "the" or c.obj is None or c.obj == c.subj or c.obj not in f.subjects:
        return None
    return replace(c, subj=c.obj, obj=c.subj), LABELS.index("neutral")


def _edit_negate(c: Clause, f: _Field, rng: random.Random):
    if c.q not in ("the", "a", "some"):
        return None
    label = "contradiction" if c.q == "the" else "neutral"
    return replace(c, negated=not c.negated), LABELS.index(label)


def _edit_quantifier(c: Clause, f: _Field, rng: random.Random):
    if c.negated or c.q == "the":
        return None
    if c.q == "every":
        new = rng.choice(["a", "some", "no"])
    elif c.q == "no":
        new = rng.choice(["a", "some", "every"])
    else:
        new = rng.choice(["every", "no"])
    if new == "no" or c.q == "no":
        label = "contradiction"
    elif c.q == "every":
        label = "entailment"  # every -> a/some, with existential import
    else:
        label = "neutral"  # a/some -> every
    return replace(c, q=new), LABELS.index(label)


_EDITS = {
    "subject-general": lambda c, f, r: _edit_subject_noun(c, f, r, True),
    "subject-specific": lambda c, f, r: _edit_subject_noun(c, f, r, False),
    "drop-adjective": lambda c, f, r: _edit_adjective(c, f, r, True),
    "add-adjective": lambda c, f, r: _edit_adjective(c, f, r, False),
    "object-general": lambda c, f, r: _edit_object(c, f, r, True),
    "object-specific": lambda c, f, r: _edit_object(c, f, r, False),
    "verb-general": lambda c, f, r: _edit_verb(c, f, r, True),
    "verb-specific": lambda c, f, r: _edit_verb(c, f, r, False),
    "sibling": _edit_sibling,
    "swap": _edit_swap,
    "negate": _edit_negate,
    "quantifier": _edit_quantifier,
}


# ---- sampling --------------------------------------------------------------------------------
def _premise(f: _Field, rng: random.Random) -> Clause:
    q = rng.choice(_QUANTIFIERS)
    verb = rng.choice(f.verbs)
    obj = rng.choice(f.objects) if verb.transitive else None
    negated = q in ("the", "a", "some") and rng.random() < 0.25
    adj = rng.choice(ADJECTIVES).en if rng.random() < 0.4 else None
    return Clause(q, rng.choice(f.subjects), adj, verb, obj, negated)


def _draw(f: _Field, rng: random.Random) -> Example:
    while True:
        c = _premise(f, rng)
        name = rng.choice(list(_EDITS))
        edited = _EDITS[name](c, f, rng)
        if edited is None:
            continue
        h, label = edited
        template = rng.choice(f.templates)
        return Example(_realise(c, template), _realise(h, template), label, name)


def generate(sizes: dict[str, int], seed: int = 0) -> dict[str, list[Example]]:
    """``sizes[split]`` examples per split, labels balanced (to within one), deterministic by
    seed. No premise occurs in two splits."""
    rng = random.Random(seed)

    def draw(split: str) -> Example:
        return _draw(_FIELDS["work" if split == "mismatched" else "everyday"], rng)

    return draw_splits(
        sizes,
        SPLITS,
        draw=draw,
        across=lambda e: e.premise,
        within=lambda e: (e.premise, e.hypothesis),
        balance=lambda e: e.label,
        classes=len(LABELS),
    )
