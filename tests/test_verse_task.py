"""Real-language tasks from the verse-aligned Bible: splits unseen in training, BPE learned on
training text only, the out-of-domain source, paraphrase labels."""
import pytest

from helpers.heads.metrics import bleu, merge_bpe
from helpers.zoo import bible, verse_task

SIZES = {"train": 300, "valid": 30, "test13": 40, "test14": 40, "mtnt": 40}


@pytest.fixture(scope="module")
def pairs():
    return verse_task.translation_splits(SIZES, seed=3, merges=500)


def test_translation_splits_have_their_sizes_and_share_no_verse(pairs):
    assert {s: len(p) for s, p in pairs.items()} == SIZES
    sources = [merge_bpe(p.src) for s in ("train", "valid", "test13", "test14") for p in pairs[s]]
    assert len(set(sources)) == len(sources)
    assert verse_task.translation_splits(SIZES, seed=3, merges=500) == pairs
    assert verse_task.translation_splits(SIZES, seed=4, merges=500)["test14"] != pairs["test14"]


def test_sentences_are_moses_tokens_with_bpe_that_merges_back(pairs):
    verses = bible.read_verses([verse_task.SOURCE, verse_task.SHIFTED, verse_task.REFERENCE])
    tokenized = {verse_task.Subwords.tokenize([v.texts[verse_task.REFERENCE]], "fr")[0]: v for v in verses[:3000]}
    some = [p for s in pairs.values() for p in s if merge_bpe(p.ref) in tokenized]
    assert some, "no reference found among the first 3000 verses"
    assert any("@@ " in p.src for s in pairs.values() for p in s)
    assert all(len(merge_bpe(p.src).split()) <= 2 * 30 for s in pairs.values() for p in s)


@pytest.mark.parametrize("shifted", ["kjv", "basic"])
def test_the_out_of_domain_set_reads_another_english_version_against_the_same_french(shifted):
    verses = bible.read_verses([verse_task.SOURCE, shifted, verse_task.REFERENCE])
    options = {} if shifted == verse_task.OUT_OF_DOMAIN else {"shifted": shifted}
    pairs = verse_task.translation_splits({"train": 50, "mtnt": 20}, seed=0, merges=200, **options)
    other = {verse_task.Subwords.tokenize([v.texts[shifted]], "en")[0]: v for v in verses
             if len(v.texts[shifted].split()) <= 30}
    found = [other.get(merge_bpe(p.src)) for p in pairs["mtnt"]]
    assert sum(v is not None for v in found) >= 18  # Moses may tokenise a rare verse differently
    for pair, verse in zip(pairs["mtnt"], found):
        if verse is not None:
            assert merge_bpe(pair.ref) == verse_task.Subwords.tokenize([verse.texts["segond"]], "fr")[0]
            assert verse.texts[shifted] != verse.texts[verse_task.SOURCE]


def test_a_second_translator_scores_far_above_copying_the_source(pairs):
    refs = [p.ref for p in pairs["test14"]]
    oracle, copy = bleu([p.oracle for p in pairs["test14"]], refs)[0], bleu([p.src for p in pairs["test14"]], refs)[0]
    assert oracle > 25 and copy < 5


def test_bpe_is_learned_on_training_text_only():
    train = ["the cat", "the cat", "the cat sat"]
    subwords = verse_task.Subwords(train, merges=50)
    assert subwords.encode(["the cat"]) == ["the cat"]  # merged: frequent in training
    assert subwords.encode(["zebra"]) != ["zebra"]  # never seen: left in pieces


def test_paraphrase_pairs_are_the_same_verse_or_a_nearby_one():
    data = verse_task.paraphrase_splits({"train": 60, "valid": 20}, seed=1)
    verses = bible.read_verses([verse_task.SOURCE, verse_task.SHIFTED])
    keys_of = {}  # a text may stand at several verses (refrains, lists)
    for v in verses:
        for text in v.texts.values():
            keys_of.setdefault(text, set()).add(v.key)
    for examples in data.values():
        assert abs(sum(e.label for e in examples) - len(examples) / 2) <= 1
        for e in examples:
            pairs = [(a, b) for a in keys_of[e.text] for b in keys_of[e.text_pair]]
            if e.label:
                assert any(a == b for a, b in pairs), e
            else:
                assert any(a[:2] == b[:2] and 0 < abs(a[2] - b[2]) <= 3 for a, b in pairs), e
    with pytest.raises(ValueError, match="unknown split"):
        verse_task.paraphrase_splits({"test": 5})
