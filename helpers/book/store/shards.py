"""Split a head-masking sweep over several processes: GPUs of one machine, or several machines.

Start the runner under a launcher that sets ``RANK`` and ``WORLD_SIZE`` (torchrun does; so does
accelerate), for example on one machine with 8 GPUs::

    torchrun --nproc_per_node 8 -m helpers.book.running.runner --profile paper --only 03_ablating_one_head

Every process executes the same notebook. Rank 0 builds missing models while the others wait for
them. In each sweep, process ``r`` owns the configurations at positions ``r, r + n, r + 2n, ...``
of the sweep's whole list (``my_share``), computes those of them that the sweep cache lacks, and
writes each to the cache as it finishes; then every process waits until the cache holds all of
them and goes on with the whole result, so the notebook never knows. Ownership depends on the
whole list, never on what is missing when a process arrives: a late rank that saw some of the
others' outputs already cached would otherwise shift its share and leave configurations that
nobody computes (the stall seen with three processes on a 16-core machine).

While it works, each process keeps a status file in the folder it writes to (``RankLog``):
running, finished or failed with the error. A waiting process reads the others' and stops at
once, naming the rank and its error, when one failed, when one on the same machine died
without a word, or when one finished without writing what it owns; it never waits silently
for work nobody does. When several ranks share a machine, each caps its torch threads to its
share of the cores (``cap_threads``). On several machines the cache (``$SIXTEEN_HEADS_CACHE``)
must be one shared folder. Only rank 0 keeps its executed notebook and run time. A restarted job
computes only what is still missing.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from tqdm.auto import tqdm

from ...base.cores import usable_cores

T = TypeVar("T")
_POLL_SECONDS = 2.0
JOB_STARTED = "SIXTEEN_HEADS_JOB_STARTED"  # epoch seconds; the runner sets it, its notebooks inherit it
_IMPORTED = time.time()


class RankFailed(RuntimeError):
    """Another process of the same job failed or died: waiting for its share would never end."""


def rank() -> int:
    return int(os.environ.get("RANK", 0))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", 1))


def timeout() -> float:
    """Seconds to wait for the other processes: ``$SIXTEEN_HEADS_SHARD_TIMEOUT``, default 2 days."""
    return float(os.environ.get("SIXTEEN_HEADS_SHARD_TIMEOUT", 2 * 24 * 3600))


def _local_world_size() -> int:
    """Processes of this job on this machine: ``LOCAL_WORLD_SIZE`` (torchrun sets it), else
    ``WORLD_SIZE`` (the safe guess when a launcher says nothing)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", world_size()))


def owner(position: int) -> int:
    """The rank that computes the item at ``position`` of a sweep's whole list."""
    return position % world_size()


def my_share(items: Sequence[T]) -> list[T]:
    """The items this process owns: every ``world_size()``-th of the WHOLE list, from its rank.
    Pass the whole list, not what is missing (see the module docstring)."""
    return list(items[rank() :: world_size()])


def cap_threads() -> int:
    """When several ranks share this machine, cap torch's intra-op threads to this rank's share of
    the cores (never raise them: torchrun already sets ``OMP_NUM_THREADS=1``). Returns the count.
    Without it, three processes of 16 threads each on 16 cores slow each other by far more than 3x."""
    import torch

    if _local_world_size() > 1:
        share = max(1, usable_cores() // _local_world_size())
        if torch.get_num_threads() > share:
            torch.set_num_threads(share)
    return torch.get_num_threads()


def _job_started() -> float:
    """When this job started (``$SIXTEEN_HEADS_JOB_STARTED``, set by the runner), else when this
    process imported this module. Status files older than that are left over from an earlier job."""
    return float(os.environ.get(JOB_STARTED, _IMPORTED))


class RankLog:
    """One status file per rank in ``<folder>/.ranks/``: ``{"state": running | finished | failed,
    "pid", "host", "what", "error"}``, written atomically. ``working`` keeps this rank's;
    ``check_others`` reads the others' and raises ``RankFailed`` for a failed or vanished rank."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder) / ".ranks"

    def _path(self, r: int) -> Path:
        return self.folder / f"rank{r}.json"

    def _write(self, state: str, what: str, error: str = "") -> None:
        from ...base.atomic import atomic_path

        self.folder.mkdir(parents=True, exist_ok=True)
        record = {"state": state, "pid": os.getpid(), "host": socket.gethostname(), "what": what, "error": error}
        with atomic_path(self._path(rank())) as tmp:
            tmp.write_text(json.dumps(record))

    @contextmanager
    def working(self, what: str) -> Iterator[None]:
        """Mark this rank running for the block, then finished, or failed with the error (re-raised)."""
        self._write("running", what)
        try:
            yield
        except BaseException as err:
            self._write("failed", what, f"{type(err).__name__}: {err}")
            raise
        self._write("finished", what)

    def states(self) -> dict[int, dict]:
        """The other ranks' records written during this job (older files are ignored)."""
        out = {}
        for r in range(world_size()):
            path = self._path(r)
            if r == rank() or not path.exists() or path.stat().st_mtime < _job_started() - 1:
                continue
            try:
                out[r] = json.loads(path.read_text())
            except ValueError:  # replaced while read: the next poll sees it whole
                continue
        return out

    def check_others(self) -> dict[int, dict]:
        """Raise ``RankFailed`` if another rank failed, or runs on this machine under a process
        that no longer exists; else return the others' records."""
        states = self.states()
        for r, s in states.items():
            if s["state"] == "failed":
                raise RankFailed(
                    f"rank {r} failed while computing {s['what']}: {s['error']}. Fix that and rerun "
                    "the same command: finished work is cached."
                )
            if s["state"] == "running" and s["host"] == socket.gethostname() and not _alive(s["pid"]):
                raise RankFailed(
                    f"rank {r} (pid {s['pid']}) exited without finishing {s['what']} and left no "
                    "error (killed? out of memory?). Rerun the same command: finished work is cached."
                )
        return states


@contextmanager
def working(folder: Path | str, what: str) -> Iterator[None]:
    """``RankLog(folder).working(what)`` when several processes share the work; nothing to record
    (and no folder needed) for a single process."""
    if world_size() == 1:
        yield
        return
    with RankLog(folder).working(what):
        yield


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine still runs (an exited child not yet reaped by its
    launcher, a zombie, counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # no /proc (not Linux), or it just went
        return not Path("/proc").exists()
    return "\nState:\tZ" not in status


def wait_until(done: Callable[[], int], total: int, what: str, check: Callable[[], None] | None = None) -> None:
    """Poll ``done()`` (how many of ``total`` are finished) until it reaches ``total``; between
    polls ``check()`` may raise (e.g. ``RankLog.check_others``) to stop waiting for work that
    will never arrive."""
    start = time.monotonic()
    with tqdm(total=total, desc=f"waiting for {what}", unit="item", leave=False) as bar:
        while (n := done()) < total:
            bar.update(n - bar.n)
            if check is not None:
                check()
            if time.monotonic() - start > timeout():
                raise TimeoutError(
                    f"rank {rank()} waited {timeout():.0f} s for {what}: {n} of {total} arrived. "
                    f"Did another process fail? Rerun the same command: finished work is cached."
                )
            time.sleep(_POLL_SECONDS)


def wait_for_file(path: Path, what: str, log: RankLog | None = None) -> None:
    """Wait until ``path`` exists; with a ``log``, stop early if the rank writing it failed."""
    wait_until(lambda: int(path.exists()), 1, what, None if log is None else log.check_others)
