"""Draw the splits of a generated task so that no two splits share an item."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")


def draw_splits(
    sizes: dict[str, int],
    names: Sequence[str],
    *,
    draw: Callable[[str], T],
    across: Callable[[T], Hashable],
    within: Callable[[T], Hashable] | None = None,
    balance: Callable[[T], int] | None = None,
    classes: int = 1,
) -> dict[str, list[T]]:
    """``sizes[split]`` items per split, drawn by ``draw(split)``.

    Args:
        across: key that no two splits share (a premise, a source sentence).
        within: key unique inside one split; by default ``across``.
        balance: class index of an item; with it, each of ``classes`` classes gets an equal
            share of every split (to within one).
    Evaluation splits are drawn before ``train``, so a small evaluation split never depends on
    the training size. Returns the splits in the order of ``names``.
    """
    unknown = set(sizes) - set(names)
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)}; the splits are {tuple(names)}")
    within = within or across
    taken: set = set()
    out: dict[str, list[T]] = {}
    for split in sorted(sizes, key=lambda s: s == "train"):
        n = sizes[split]
        quota = [n // classes + (i < n % classes) for i in range(classes)]
        items: list[T] = []
        here: set = set()
        attempts = 0
        while len(items) < n:
            attempts += 1
            if attempts > 200 * n + 1000:
                raise RuntimeError(f"cannot draw {n} distinct {split} items; the generator's space is too small")
            item = draw(split)
            cls = balance(item) if balance else 0
            if quota[cls] == 0 or across(item) in taken or within(item) in here:
                continue
            quota[cls] -= 1
            here.add(within(item))
            items.append(item)
        taken.update(across(item) for item in items)
        out[split] = items
    return {s: out[s] for s in names if s in out}
