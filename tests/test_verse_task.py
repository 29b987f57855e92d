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
    other = {
        verse_task.Subwords.tokenize([v.texts[shifted]], "en")[0]: v
        for v in verses
        if len(v.texts[shifted].split()) <= 30
    }
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


WIDE = dict(train_max_words=40, train_sources=("web", "basic"), train_references=("segond", "darby"))


@pytest.fixture(scope="module")
def wide_pairs():
    return verse_task.translation_splits({**SIZES, "train": 400}, seed=3, merges=500, max_words=20, **WIDE)


def test_more_training_pairs_leave_the_held_out_splits_as_they_were(wide_pairs):
    narrow = verse_task.translation_splits(SIZES, seed=3, merges=500, max_words=20)
    for split in ("valid", "test13", "test14", "mtnt"):  # the same verses (BPE differs: it learns from training)
        assert [merge_bpe(p.src) for p in wide_pairs[split]] == [merge_bpe(p.src) for p in narrow[split]]
        assert [merge_bpe(p.oracle) for p in wide_pairs[split]] == [merge_bpe(p.oracle) for p in narrow[split]]
    assert len(wide_pairs["train"]) <= 400 * 4 and len(wide_pairs["train"]) % 4 == 0  # 2 sources x 2 references
    assert all(p.oracle == "" for p in wide_pairs["train"])  # the second translator never trains
    assert max(len(merge_bpe(p.src).split()) for p in wide_pairs["train"]) > 20  # longer verses train


def test_no_held_out_verse_in_any_version_is_in_the_training_pairs(wide_pairs):
    by_text = {}  # every version's tokenised text -> verse keys
    verses = bible.read_verses(list(bible.VERSIONS))
    segond = verse_task.Subwords.tokenize([v.texts["segond"] for v in verses], "fr")
    keys = {t: v.key for t, v in zip(segond, verses)}
    held = [keys[merge_bpe(p.ref)] for s in ("valid", "test13", "test14", "mtnt") for p in wide_pairs[s]]
    assert len(held) == sum(len(wide_pairs[s]) for s in ("valid", "test13", "test14", "mtnt"))
    held_verses = [v for v in verses if v.key in set(held)]
    for name in bible.VERSIONS:
        lang = "fr" if name in ("segond", "ostervald", "darby") else "en"
        for text in verse_task.Subwords.tokenize([v.texts[name] for v in held_verses], lang):
            by_text[text] = name
    train = {merge_bpe(p.src) for p in wide_pairs["train"]} | {merge_bpe(p.ref) for p in wide_pairs["train"]}
    assert not train & set(by_text), sorted(train & set(by_text))[:3]
    held_chapters = {k[:2] for k in held}
    train_chapters = {keys[merge_bpe(p.ref)][:2] for p in wide_pairs["train"] if merge_bpe(p.ref) in keys}
    assert train_chapters and not train_chapters & held_chapters


@pytest.mark.parametrize("version", ["kjv", "kjv2000", "ostervald"])
def test_held_out_versions_cannot_train(version):
    role = {"ostervald": "train_references"}.get(version, "train_sources")
    with pytest.raises(ValueError, match="never train"):
        verse_task.translation_splits({"train": 10, "test13": 5}, merges=50, **{role: ("web", version)})
