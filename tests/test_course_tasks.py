"""The generated course tasks: deterministic, disjoint splits, and labels or references that
agree with checks written independently of the generators (lexicon lookups and word patterns)."""

import collections
import re

import pytest

from helpers.zoo import appendix_tasks, lexicon, nli_task, translation_task
from helpers.zoo.nli_task import LABELS

NLI_SIZES = {"train": 3000, "matched": 600, "mismatched": 600}
MT_SIZES = {"train": 3000, "valid": 200, "test13": 300, "test14": 300, "mtnt": 300}


@pytest.fixture(scope="module")
def nli():
    return nli_task.generate(NLI_SIZES, seed=0)


@pytest.fixture(scope="module")
def mt():
    return translation_task.generate(MT_SIZES, seed=0)


# ---- determinism and disjointness --------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda s: nli_task.generate({"train": 200, "matched": 50}, s),
        lambda s: translation_task.generate({"train": 200, "mtnt": 50}, s),
        lambda s: appendix_tasks.generate("paraphrase", {"train": 200, "valid": 50}, s),
    ],
    ids=["nli", "translation", "paraphrase"],
)
def test_same_seed_same_data_other_seed_other_data(make):
    assert make(0) == make(0)
    assert make(0) != make(1)


def test_nli_splits_disjoint_balanced_and_sized(nli):
    premises = {split: {e.premise for e in ex} for split, ex in nli.items()}
    assert not premises["train"] & premises["matched"]
    assert not premises["train"] & premises["mismatched"]
    for split, examples in nli.items():
        assert len(examples) == NLI_SIZES[split]
        counts = collections.Counter(e.label for e in examples)
        assert max(counts.values()) - min(counts.values()) <= 1


def test_translation_splits_disjoint(mt):
    clean = {split: {p.src for p in pairs} for split, pairs in mt.items() if split != "mtnt"}
    for a in clean:
        for b in clean:
            if a < b:
                assert not clean[a] & clean[b], (a, b)
    # the noisy split is disjoint too: its references (clean) never equal a training reference's source tree
    assert len({p.src for p in mt["mtnt"]}) == MT_SIZES["mtnt"]


@pytest.mark.parametrize("task", appendix_tasks.TASKS)
def test_appendix_splits_disjoint_and_both_labels(task):
    data = appendix_tasks.generate(task, {"train": 400, "valid": 100}, seed=0)
    assert not {e.text for e in data["train"]} & {e.text for e in data["valid"]}
    for examples in data.values():
        share = sum(e.label for e in examples) / len(examples)
        assert 0.3 < share < 0.7


def test_unknown_split_or_task_is_refused():
    with pytest.raises(ValueError, match="splits are"):
        nli_task.generate({"dev": 3})
    with pytest.raises(ValueError, match="tasks are"):
        appendix_tasks.generate("cola", {"train": 3})


# ---- NLI labels, checked by word patterns ------------------------------------------------------
def _words(s):
    return s.removesuffix(" .").split()


def _independent_label(premise: str, hypothesis: str) -> str | None:
    """The label for the pair types a reader can check by eye; None for the others."""
    p, h = _words(premise), _words(hypothesis)
    if p[:2] == ["it", "is"] or p[0] == "at":  # other templates: not checked here
        return None
    negations = ("does", "do")
    p_neg, h_neg = any(w in negations for w in p), any(w in negations for w in h)
    if p_neg != h_neg:  # one side negated, nothing else changed
        longer, shorter = (h, p) if h_neg else (p, h)
        stripped = [w for w in longer if w not in ("does", "do", "not")]
        if [lexicon.verb(w).en_base if _is_verb(w) else w for w in stripped] == [
            lexicon.verb(w).en_base if _is_verb(w) else w for w in shorter
        ]:
            return "contradiction" if p[0] == "the" else "neutral"
        return None
    if sorted(p) == sorted(h) and p != h:
        return "neutral"  # a role swap keeps every word
    if p[0] != h[0] and p[1:] == h[1:] or (p[0] != h[0] and len(p) == len(h)):
        q_p, q_h = p[0], h[0]
        if "no" in (q_p, q_h):
            return "contradiction"
        if q_p == "every" and q_h in ("a", "an", "some"):
            return "entailment"
        if q_p in ("a", "an", "some") and q_h == "every":
            return "neutral"
        return None
    if len(p) == len(h) and p[0] == h[0]:
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(p, h)) if a != b]
        if len(diff) == 1 and diff[0][0] in (1, 2) and _is_noun(diff[0][1]) and _is_noun(diff[0][2]):
            a, b = (lexicon.noun(w).en for w in diff[0][1:])
            if lexicon.is_hyponym(a, b):  # subject made more general
                return "entailment" if p[0] in ("the", "a", "an", "some") else "neutral"
            if lexicon.is_hyponym(b, a):  # more specific
                return "neutral" if p[0] in ("the", "a", "an", "some") else "entailment"
    return None


def _is_verb(w):
    try:
        lexicon.verb(w)
        return True
    except KeyError:
        return False


def _is_noun(w):
    try:
        lexicon.noun(w)
        return True
    except KeyError:
        return False


def test_nli_labels_follow_their_rules(nli):
    checked = 0
    for e in nli["train"] + nli["matched"]:
        expected = _independent_label(e.premise, e.hypothesis)
        if expected is not None:
            assert LABELS[e.label] == expected, (e.premise, e.hypothesis, e.edit)
            checked += 1
    assert checked > 0.4 * (NLI_SIZES["train"] + NLI_SIZES["matched"])


def test_nli_mismatched_vocabulary_and_templates_differ(nli):
    train_words = {w for e in nli["train"] for w in (e.premise + " " + e.hypothesis).split()}
    mm_nouns = {w for e in nli["mismatched"] for w in e.premise.split() if _is_noun(w)}
    assert mm_nouns and not mm_nouns & train_words
    assert any(
        e.premise.startswith(("at the hospital", "it is")) or " that is " in e.premise for e in nli["mismatched"]
    )
    assert not any(e.premise.startswith(("at the hospital", "it is")) for e in nli["train"])


def test_nli_word_overlap_does_not_decide_the_label(nli):
    """Pairs with identical bags of words exist with non-entailment labels, and 'not' occurs in
    hypotheses of every label."""
    labels_with_not = {LABELS[e.label] for e in nli["train"] if " not " in e.hypothesis}
    assert labels_with_not == set(LABELS)
    assert any(sorted(_words(e.premise)) == sorted(_words(e.hypothesis)) for e in nli["train"])


# ---- translation references, checked by lexicon lookups ----------------------------------------
def test_negation_brackets_the_verb(mt):
    for p in mt["train"]:
        n_not = p.src.split().count("not")
        fr = p.ref.split()
        assert fr.count("pas") == n_not
        assert fr.count("ne") + fr.count("n'") == n_not


def test_simple_sentences_agree_in_gender_number_and_order(mt):
    """'the ADJ NOUN VERB .' (intransitive) must be 'DET NOUN ADJ VERB .' or with the adjective
    first for the preposed ones, every word in the right gender and number."""
    checked = 0
    adjectives = {a.en: a for a in lexicon.ADJECTIVES}
    for p in mt["train"]:
        w = _words(p.src)
        if len(w) != 4 or w[0] != "the" or w[1] not in adjectives:
            continue
        n, v, a = lexicon.noun(w[2]), lexicon.verb(w[3]), adjectives[w[1]]
        plural = w[2] == n.en_pl and n.en_pl != n.en
        if w[3] not in (v.en, v.en_base) or v.transitive is not False:
            continue
        k = (2 if plural else 0) + (n.gender == "f")
        adj = {a.fr[k], translation_task.FREE_CHOICES.get(a.fr[k], a.fr[k])}
        fr = _words(p.ref)
        noun_fr = n.fr_pl if plural else n.fr
        det = "les" if plural else None
        if det:
            assert fr[0] == det
        else:
            first = fr[1]
            assert fr[0] == ("l'" if first[0] in "aeéiouh" else "la" if n.gender == "f" else "le"), p
        if a.before:
            assert fr[1] in adj and fr[2] == noun_fr, p
        else:
            assert fr[1] == noun_fr and fr[2] in adj, p
        verb_fr = " ".join(fr[3:])
        expected = v.fr_pl if plural else v.fr
        assert verb_fr in {expected, translation_task.FREE_CHOICES.get(expected)}, p
        checked += 1
    assert checked >= 10


def test_free_choices_keep_references_varied_but_valid(mt):
    refs = " ".join(p.ref for p in mt["train"]).split()
    counts = collections.Counter(refs)
    assert counts["gros"] + counts["grosse"] > 0 and counts["grand"] + counts["grande"] > 0


def test_mtnt_is_noisy_longer_and_uses_held_out_pairs(mt):
    adjectives = {a.en: a for a in lexicon.ADJECTIVES}

    def held_out_pairs(text):
        w = text.lower().split()
        return {
            (a, b)
            for a, b in zip(w, w[1:])
            if a in adjectives and _is_noun(b) and translation_task.held_out(adjectives[a], lexicon.noun(b))
        }

    assert not any(held_out_pairs(p.src) for p in mt["train"])
    mean = lambda pairs: sum(len(p.src.split()) for p in pairs) / len(pairs)
    assert mean(mt["mtnt"]) > mean(mt["test13"]) + 2
    noisy = sum(p.src != p.src.lower() or not p.src.endswith(" .") for p in mt["mtnt"])
    assert noisy > 0.5 * len(mt["mtnt"])
    # the references are clean French: the same tokens as the in-domain references use
    vocab = {w for p in mt["train"] for w in p.ref.split()}
    unseen = {w for p in mt["mtnt"] for w in p.ref.split()} - vocab
    assert not unseen


# ---- appendix tasks ----------------------------------------------------------------------------
def test_sentiment_labels_follow_the_main_clause():
    data = appendix_tasks.generate("sentiment", {"train": 500, "valid": 300}, seed=3)
    for e in data["train"] + data["valid"]:
        clauses = e.text.removesuffix(" .").split(" , ")
        if e.text.startswith("although"):
            main = clauses[1]
        elif len(clauses) == 2 and clauses[1].startswith("although"):
            main = clauses[0]
        else:
            main = clauses[-1].removeprefix("but ")
        words = main.split()
        polarity = words[-1] in appendix_tasks.POSITIVE
        if {"not", "never", "hardly"} & set(words):
            polarity = not polarity
        assert e.label == int(polarity), e
    unseen = set(appendix_tasks.POSITIVE + appendix_tasks.NEGATIVE) - appendix_tasks.SEEN
    assert not any(unseen & set(e.text.split()) for e in data["train"])
    assert any(unseen & set(e.text.split()) for e in data["valid"])


def test_acceptability_labels_match_the_rules():
    data = appendix_tasks.generate("acceptability", {"train": 600}, seed=1)["train"]
    nouns = {n.en: n for n in lexicon.NOUNS}
    plurals = {n.en_pl for n in lexicon.NOUNS if n.en_pl != n.en}
    adjectives = {a.en for a in lexicon.ADJECTIVES}
    for e in data:
        w = _words(e.text)
        broken = (
            any(
                a in ("a", "an", "two") and ((b in plurals) if a != "two" else (b in nouns and b not in plurals))
                for a, b in zip(w, w[1:])
            )
            or any(_is_noun(a) and b in adjectives for a, b in zip(w, w[1:]))
            or any(a == "not" and prev not in ("does", "do") for prev, a in zip([""] + w, w))
            or any(a == "does" and _is_verb(b2) and b2 == lexicon.verb(b2).en for a, b2 in zip(w, w[2:]))
        )
        if e.label == 1:
            assert not broken, e
        elif e.kind in ("number", "adjective-order", "bare-not"):
            assert broken, e


def test_paraphrases_keep_the_words_up_to_synonyms():
    data = appendix_tasks.generate("paraphrase", {"train": 400}, seed=2)["train"]
    back = {v: k for k, v in appendix_tasks.SYNONYMS.items()}

    def bag(text):
        text = " ".join(back.get(w, w) for w in text.split())
        for multi, single in (("close to", "near"),):
            text = text.replace(multi, single)
        return sorted(w for w in text.split() if w not in (",", "."))

    for e in data:
        if e.label == 1:
            assert bag(e.text) == bag(e.text_pair), e
        if e.kind in ("negate", "noun"):
            assert bag(e.text) != bag(e.text_pair), e
    assert re.search(r"\bnot\b", " ".join(e.text_pair for e in data))


def test_a_generator_space_too_small_for_the_sizes_is_reported():
    from helpers.zoo.splits import draw_splits

    with pytest.raises(RuntimeError, match="space is too small"):
        draw_splits({"train": 5}, ("train",), draw=lambda split: "same", across=lambda x: x)
