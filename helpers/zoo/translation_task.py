"""A generated English->French translation task, standing in for WMT En-Fr and MTNT.

A small synchronous grammar draws one sentence tree and realises it in both languages, so the
reference is exact. French needs what makes translation more than word substitution: gender
and number agreement of determiners, adjectives and verbs; adjectives before or after the
noun; elision (l', n', qu'); contraction (de + le = du); negation around the verb (ne ... pas) and its
effect on the object's article (pas de); ``de`` before a preposed plural adjective;
subject and object relative clauses (qui / que) and subordinate clauses.

Text is tokenised: lower case, words and punctuation separated by single spaces, elided
French forms as their own tokens (``l' oiseau``). BLEU on it is tokenised BLEU, as the paper.

Splits (roles in the paper): ``train``; ``valid``; ``test13`` (newstest2013: choose heads on
it); ``test14`` (newstest2014: report on it); ``mtnt`` (MTNT: out of domain). ``mtnt`` sources
are longer, use adjective-noun pairs held out of every other split, and carry noise (typos,
casing, informal punctuation); its references are clean translations of the intended sentence.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from .lexicon import ADJECTIVES, PLACES, Adjective, Noun, Verb, field_nouns, field_verbs
from .splits import draw_splits

NOUNS = field_nouns("animals", "home")
_TRANSITIVE = field_verbs("everyday", transitive=True)
_INTRANSITIVE = field_verbs("everyday", transitive=False)
_DETERMINERS = ["the", "a", "my", "the_pl", "some_pl", "two_pl"]
_PREPOSITIONS = {"in": "dans", "near": "près de", "behind": "derrière", "with": "avec"}
_CONJUNCTIONS = {"because": "parce que", "when": "quand", "while": "pendant que"}
SPLITS = ("train", "valid", "test13", "test14", "mtnt")


def held_out(adj: Adjective, n: Noun) -> bool:
    """Adjective-noun pairs that only the out-of-domain split uses (about one in five)."""
    return int(hashlib.md5(f"{adj.en}|{n.en}".encode()).hexdigest(), 16) % 5 == 0


@dataclass
class _NP:
    det: str
    noun: Noun
    adj: Adjective | None = None
    rel: Clause | None = None  # relative clause; its subject or object is this NP (gap)
    rel_object: bool = False  # True: "the dog that the cat sees" (gap is the object)

    @property
    def plural(self) -> bool:
        return self.det.endswith("_pl")


@dataclass
class Clause:
    subj: _NP | None  # None: the gap of a subject relative clause
    verb: Verb
    obj: _NP | None = None
    negated: bool = False


@dataclass
class Sentence:
    main: Clause
    pp: tuple[str, _NP] | None = None
    sub: tuple[str, Clause] | None = None


# ---- English ---------------------------------------------------------------------------------
def english_np(np: _NP) -> list[str]:
    """Words of a noun phrase, relative clause included."""
    det = {"the": "the", "a": "a", "my": "my", "the_pl": "the", "some_pl": "some", "two_pl": "two"}[np.det]
    if det == "a" and (np.adj.en if np.adj else np.noun.en)[0] in "aeiou":
        det = "an"
    words = [det] + ([np.adj.en] if np.adj else []) + [np.noun.en_pl if np.plural else np.noun.en]
    if np.rel is not None:
        words += ["that"] + _en_clause(np.rel, head_plural=np.plural)
    return words


def _en_vp(verb: Verb, plural: bool, negated: bool) -> list[str]:
    if negated:
        return ["do" if plural else "does", "not", verb.en_base]
    return [verb.en_base if plural else verb.en]


def _en_clause(c: Clause, head_plural: bool = False) -> list[str]:
    plural = c.subj.plural if c.subj is not None else head_plural
    subj = english_np(c.subj) if c.subj is not None else []
    obj = english_np(c.obj) if c.obj is not None else []
    return subj + _en_vp(c.verb, plural, c.negated) + obj


def english(s: Sentence) -> str:
    words = _en_clause(s.main)
    if s.pp:
        words += [s.pp[0]] + english_np(s.pp[1])
    if s.sub:
        words += [s.sub[0]] + _en_clause(s.sub[1])
    return " ".join(words + ["."])


# ---- French ----------------------------------------------------------------------------------
def _vowel(word: str) -> bool:
    return word[0] in "aeéèiouh"


def _fr_adj(adj: Adjective, n: Noun, plural: bool) -> str:
    return adj.fr[(2 if plural else 0) + (1 if n.gender == "f" else 0)]


def _fr_np(np: _NP, negated_object: bool = False) -> list[str]:
    """``negated_object``: the NP is the object of a negated verb, so an indefinite article
    becomes ``de`` (``il ne voit pas de chien``)."""
    n, plural = np.noun, np.plural
    noun = n.fr_pl if plural else n.fr
    before = [_fr_adj(np.adj, n, plural)] if np.adj and np.adj.before else []
    after = [_fr_adj(np.adj, n, plural)] if np.adj and not np.adj.before else []
    following = (before or [noun])[0]
    fem = n.gender == "f"
    if np.det == "the":
        det = "l'" if _vowel(following) else ("la" if fem else "le")
    elif np.det == "a":
        det = "une" if fem else "un"
    elif np.det == "my":
        det = "ma" if fem and not _vowel(following) else "mon"
    else:
        det = {"the_pl": "les", "some_pl": "des", "two_pl": "deux"}[np.det]
    if det in ("un", "une", "des") and negated_object or det == "des" and before:
        det = "d'" if _vowel(following) else "de"  # pas de chien; de petits chiens
    words = [det] + before + [noun] + after
    if np.rel is not None:
        words += _fr_relative(np)
    return words


def _fr_vp(verb: Verb, plural: bool, negated: bool) -> list[str]:
    form = verb.fr_pl if plural else verb.fr
    if negated:
        return ["n'" if _vowel(form) else "ne", form, "pas"]
    return [form]


def _fr_relative(np: _NP) -> list[str]:
    c = np.rel
    if np.rel_object:  # "le chien que le chat voit": the relative's subject precedes its verb
        subj = _fr_np(c.subj)
        pronoun = "qu'" if _vowel(subj[0]) else "que"
        return [pronoun] + subj + _fr_vp(c.verb, c.subj.plural, c.negated)
    obj = _fr_np(c.obj, c.negated) if c.obj is not None else []
    return ["qui"] + _fr_vp(c.verb, np.plural, c.negated) + obj


def _fr_clause(c: Clause) -> list[str]:
    obj = _fr_np(c.obj, c.negated) if c.obj is not None else []
    return _fr_np(c.subj) + _fr_vp(c.verb, c.subj.plural, c.negated) + obj


def _fr_pp(prep: str, np: _NP) -> list[str]:
    words = _fr_np(np)
    if prep != "near":
        return [_PREPOSITIONS[prep]] + words
    if words[0] == "le":
        return ["près", "du"] + words[1:]
    if words[0] == "les":
        return ["près", "des"] + words[1:]
    return ["près", "d'" if _vowel(words[0]) else "de"] + words


# Words with two equally good translations. The reference takes one at random (a coin per
# occurrence), as a human translator would, so no system can match every reference word for
# word: BLEU against one reference stays below 100 however good the model, as in real MT.
# Each pair agrees in gender, number and initial sound, so agreement and elision still hold.
FREE_CHOICES = {
    "voit": "remarque",
    "voient": "remarquent",
    "grand": "gros",
    "grande": "grosse",
    "grands": "gros",
    "grandes": "grosses",
    "content": "heureux",
    "contente": "heureuse",
    "contents": "heureux",
    "contentes": "heureuses",
    "fatigué": "épuisé",
    "fatiguée": "épuisée",
    "fatigués": "épuisés",
    "fatiguées": "épuisées",
    "aime": "apprécie",
    "aiment": "apprécient",
    "près": "à côté",
    "mange": "se nourrit",
    "mangent": "se nourrissent",
}


def _french(s: Sentence, rng: random.Random | None = None) -> str:
    """The French reference of ``s``; with ``rng``, words in FREE_CHOICES take either form."""
    words = _french_words(s)
    if rng is not None:
        words = [FREE_CHOICES[w] if w in FREE_CHOICES and rng.random() < 0.5 else w for w in words]
    return " ".join(words)


def _french_words(s: Sentence) -> list[str]:
    words = _fr_clause(s.main)
    if s.pp:
        words += _fr_pp(*s.pp)
    if s.sub:
        conj = _CONJUNCTIONS[s.sub[0]]
        clause = _fr_clause(s.sub[1])
        if conj.endswith("que") and _vowel(clause[0]):
            conj = conj[:-1] + "'"
        words += conj.split() + clause
    return words + ["."]


# ---- sampling --------------------------------------------------------------------------------
class Grammar:
    """Draws sentence trees. ``out_of_domain`` draws longer trees that use held-out pairs."""

    def __init__(self, rng: random.Random, out_of_domain: bool = False):
        self.rng, self.ood = rng, out_of_domain

    def np(self, depth: int, nouns: list[Noun] = NOUNS, allow_rel: bool = True) -> _NP:
        r = self.rng
        n = r.choice(nouns)
        det = r.choice(_DETERMINERS)
        adj = None
        if r.random() < (0.6 if self.ood else 0.35):
            pool = [a for a in ADJECTIVES if held_out(a, n) == self.ood] or None
            if pool:
                adj = r.choice(pool)
        np = _NP(det, n, adj)
        if allow_rel and depth == 0 and r.random() < (0.3 if self.ood else 0.15):
            if r.random() < 0.5:
                np.rel, np.rel_object = (
                    Clause(self.np(1, allow_rel=False), r.choice(_TRANSITIVE), None, r.random() < 0.15),
                    True,
                )
            else:
                np.rel = self.clause(1, with_subject=False)
        return np

    def clause(self, depth: int, with_subject: bool = True) -> Clause:
        r = self.rng
        subj = self.np(depth) if with_subject else None
        if r.random() < 0.7:
            return Clause(
                subj, r.choice(_TRANSITIVE), self.np(depth + 1 if not with_subject else depth), r.random() < 0.2
            )
        return Clause(subj, r.choice(_INTRANSITIVE), None, r.random() < 0.2)

    def sentence(self) -> Sentence:
        r = self.rng
        s = Sentence(self.clause(0))
        if r.random() < 0.3:
            s.pp = (r.choice(list(_PREPOSITIONS)), _NP(r.choice(["the", "the_pl", "a", "my"]), r.choice(PLACES)))
        if r.random() < (0.4 if self.ood else 0.2):
            s.sub = (r.choice(list(_CONJUNCTIONS)), self.clause(1))
        if self.ood and not _uses_held_out(s):
            return self.sentence()
        return s


def _nps(s: Sentence):
    def walk_np(np):
        yield np
        if np.rel is not None:
            yield from walk_clause(np.rel)

    def walk_clause(c):
        for np in (c.subj, c.obj):
            if np is not None:
                yield from walk_np(np)

    yield from walk_clause(s.main)
    if s.sub:
        yield from walk_clause(s.sub[1])


def _uses_held_out(s: Sentence) -> bool:
    return any(np.adj is not None and held_out(np.adj, np.noun) for np in _nps(s))


# ---- noise for the MTNT role -------------------------------------------------------------------
def _add_noise(sentence: str, rng: random.Random) -> str:
    """Typos (swap, drop or double a letter), casing, informal punctuation; words keep their order."""
    words = sentence.split()[:-1]  # without the final "."
    for i, w in enumerate(words):
        if len(w) > 3 and rng.random() < 0.08:
            j = rng.randrange(len(w) - 1)
            kind = rng.choice(["swap", "drop", "double"])
            if kind == "swap":
                w = w[:j] + w[j + 1] + w[j] + w[j + 2 :]
            elif kind == "drop":
                w = w[:j] + w[j + 1 :]
            else:
                w = w[:j] + w[j] + w[j:]
        if rng.random() < 0.05:
            w = w.upper()
        words[i] = w
    if rng.random() < 0.5:
        words[0] = words[0].capitalize()
    end = rng.choice([".", "!", "!!", "...", "?!", "", ":)", "lol"])
    return " ".join(words + ([end] if end else []))


# ---- splits ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pair:
    src: str
    ref: str
    oracle: str = ""  # an exact translation with its own coin flips: BLEU(oracle, ref) is the ceiling
    raw_ref: str = ""  # the reference as published, before tokenisation ("": only the tokenised one)


def generate(sizes: dict[str, int], seed: int = 0) -> dict[str, list[Pair]]:
    """Splits named in ``SPLITS`` with ``sizes[split]`` pairs each; no English source (before
    noise) occurs twice. Deterministic for a given ``sizes`` and ``seed``."""
    rng = random.Random(seed)
    grammars = {False: Grammar(rng), True: Grammar(rng, out_of_domain=True)}
    clean: dict[Pair, str] = {}

    def draw(split: str) -> Pair:
        tree = grammars[split == "mtnt"].sentence()
        src = english(tree)
        pair = Pair(_add_noise(src, rng) if split == "mtnt" else src, _french(tree, rng), _french(tree, rng))
        clean[pair] = src
        return pair

    return draw_splits(sizes, SPLITS, draw=draw, across=lambda p: clean[p])
