"""Which saved tables a chapter read, so that it reruns when one of them changes.

A chapter's executed copy is reused while its notebook, parameters, models and code are unchanged
(``runner.fingerprint``). A page that reads other chapters' tables (the scorecard, the front
page, chapter 12) also goes stale when those tables change: after a student reruns chapter 03
with another ``alpha``, the scorecard must judge the new rows. So the chapter's kernel watches
every file it opens for reading under the results folder (``watch_reads``: a Python audit hook,
set before the chapter's first line, whichever function reads the table). The runner stores the
digest of each file read in the executed notebook (``digests``) and reuses the copy only while
every one of them is unchanged (``unchanged``).

Left out: what every build writes rather than a chapter (``UNTRACKED``: a page that read it would
never be current), and files the chapter wrote without reading.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

ENV = "SIXTEEN_HEADS_READS"  # the file the kernel lists the results it opened in, one path a line
# Written by every build, not by a chapter: the run times and sweep costs (the runner appends to
# them after each chapter) and models.json (make models rewrites it, with its own run's seconds;
# the models themselves are in the chapter's cache key already).
UNTRACKED = ("run_times", "sweep_costs", "models")  # file or folder names, without their suffix


def _results_root() -> Path:
    from ..store.results import results_root

    return results_root().resolve()


def watch_reads() -> None:
    """In a chapter's kernel: append to ``$SIXTEEN_HEADS_READS`` each file under the results
    folder that this process opens for reading, once. Does nothing when the variable is unset."""
    listing = os.environ.get(ENV)
    if not listing:
        return
    root = str(_results_root()) + os.sep
    seen: set[str] = set()

    def hook(event: str, args: tuple) -> None:
        if event != "open" or not isinstance(args[0], (str, os.PathLike)):
            return
        mode = args[1]
        if not isinstance(mode, str) or any(c in mode for c in "wax+"):
            return
        path = os.path.abspath(os.fspath(args[0]))
        if path.startswith(root) and path not in seen:
            seen.add(path)
            with open(listing, "a") as out:  # "a": not a read, so the hook ignores it
                out.write(path + "\n")

    sys.addaudithook(hook)


def _tracked(relative: str) -> bool:
    return not any(Path(part).stem in UNTRACKED for part in Path(relative).parts)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def digests(listing: Path, root: Path | None = None) -> dict[str, str]:
    """``{path relative to the results root: digest of its bytes now}`` of each file ``listing``
    names that still exists and is tracked; {} when there is no listing."""
    root = root or _results_root()
    if not listing.exists():
        return {}
    found = {}
    for line in sorted(set(listing.read_text().splitlines())):
        path = Path(line)
        if not path.is_file() or not path.is_relative_to(root):
            continue
        relative = path.relative_to(root).as_posix()
        if _tracked(relative):
            found[relative] = _digest(path)
    return found


def changed(recorded: Mapping[str, str], root: Path | None = None) -> list[str]:
    """The files of ``recorded`` (``digests``' output) that are gone or differ now, sorted."""
    root = root or _results_root()
    gone = [rel for rel in recorded if not (root / rel).is_file()]
    return sorted(gone + [rel for rel, d in recorded.items() if rel not in gone and _digest(root / rel) != d])
