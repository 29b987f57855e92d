"""Where the time goes: a ledger of the timed blocks of work a run does.

The library's functions that do a block of work worth timing (a sweep over head configurations,
an importance estimate, gate training, a timing run) open an ``entry``:

    with ledger.entry("decoding", "one-head sweep", model=model, examples=200, configs=145) as e:
        ...                       # compute; e.computed(k) when only k configurations were new

and when the block ends, every listener receives one ``_Entry``: its category (``CATEGORIES``),
what it was, the model's name (``name_model``; else its class), the examples and configurations
it covered, how many configurations it computed (the rest were read from a cache), its seconds,
and its own seconds (less the entries nested in it, so that shares by category add up to the
whole). With no listener an entry costs two clock readings. ``$SIXTEEN_HEADS_LEDGER`` names a
JSON-lines file that every entry of the process is appended to (the book's runner sets it for
each chapter, ``helpers/book/store/sweep_costs.py``).
"""

from __future__ import annotations

import json
import os
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from torch import nn

CATEGORIES = ("decoding", "teacher-forced scoring", "classifier scoring", "importance", "gate training", "timing runs")
CONTAINER = "container"  # an entry that only groups others (a pruning curve's steps): its own time is overhead
ENV = "SIXTEEN_HEADS_LEDGER"

_names: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
_listeners: list[Callable[[_Entry], None]] = []
_open: list[_Entry] = []


@dataclass
class _Entry:
    """One timed block: ``seconds`` in all, ``own_seconds`` outside the entries nested in it;
    ``computed``: the configurations it computed (``configs`` minus those read from a cache)."""

    category: str
    what: str
    model: str
    examples: int
    configs: int
    computed: int
    depth: int
    seconds: float = 0.0
    own_seconds: float = 0.0
    _nested: float = field(default=0.0, repr=False)

    def set_computed(self, configs: int) -> None:
        """Only ``configs`` of the entry's configurations were computed; the rest came from a cache."""
        self.computed = int(configs)

    def record(self) -> dict:
        out = asdict(self)
        del out["_nested"]
        return out


def name_model(model: nn.Module, name: str) -> nn.Module:
    """Give ``model`` the name its ledger entries carry (e.g. ``nli@1``, a model run); returns it."""
    _names[model] = name
    return model


def model_name(model: nn.Module | str | None) -> str:
    if model is None or isinstance(model, str):
        return model or ""
    return _names.get(model, type(model).__name__)


@contextmanager
def entry(
    category: str, what: str, *, model: nn.Module | str | None = None, examples: int = 0, configs: int = 1
) -> Iterator[_Entry]:
    """Time the block inside as one ``_Entry`` (see the module docstring); ``category`` is one of
    ``CATEGORIES`` or ``CONTAINER``."""
    if category not in (*CATEGORIES, CONTAINER):
        raise ValueError(f"unknown ledger category {category!r}; use one of {(*CATEGORIES, CONTAINER)}")
    e = _Entry(category, what, model_name(model), int(examples), int(configs), int(configs), len(_open))
    _open.append(e)
    start = time.perf_counter()
    try:
        yield e
    finally:
        e.seconds = time.perf_counter() - start
        e.own_seconds = max(0.0, e.seconds - e._nested)
        _open.pop()
        if _open:
            _open[-1]._nested += e.seconds
        _publish(e)


def listen(callback: Callable[[_Entry], None]) -> Callable[[], None]:
    """Call ``callback(entry)`` for every finished entry; returns a function that stops it."""
    _listeners.append(callback)
    return lambda: _listeners.remove(callback) if callback in _listeners else None


def _publish(e: _Entry) -> None:
    for callback in list(_listeners):
        callback(e)
    path = os.environ.get(ENV)
    if path:
        with open(path, "a") as f:  # one line per write: an interrupted run leaves whole lines
            f.write(json.dumps(e.record()) + "\n")
