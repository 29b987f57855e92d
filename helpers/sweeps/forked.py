"""Split a sweep's configurations over forked processes on a CPU.

On a CPU, torch's own threads speed a sweep up less than the cores it gets: a MiniLM forward
pass runs 1.56 times faster on 2 threads than on 1, and greedy decoding, which spends much of
its time in Python and small operations, gains less. Two processes of one thread each, every
one with its share of the configurations, keep both cores busy: measured on the course models
(2 cores), the classifier's 72 one-head configurations took 0.87 and the translation model's
144 took 0.83 of the time on one process of 2 threads, with the same predictions and
hypotheses.

The processes are forked, so each starts with the model, the batches and any state the caller
set up (masks, patched forwards) without copying or pickling them; they send back only results
(pickled by value) and progress. ``sweep_processes(model)`` chooses how many: 1 on a GPU, under
torchrun (which already splits sweeps, ``helpers/book/store/shards.py``) and off Linux (fork is not
safe on macOS); else 2 when the machine has at least 2 cores; ``$SIXTEEN_HEADS_SWEEP_PROCESSES``
overrides it. A process that fails raises ``SweepProcessError`` in the caller with its
traceback; one that dies (killed, out of memory) raises it with its exit code.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing import connection, get_context
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from ..base.cores import usable_cores
from ..base.devices import device_of

ENV = "SIXTEEN_HEADS_SWEEP_PROCESSES"


class SweepProcessError(RuntimeError):
    """A forked sweep process raised an error or died."""


def sweep_processes(model: nn.Module | None = None) -> int:
    """Processes a sweep over ``model`` should use (see the module docstring)."""
    chosen = os.environ.get(ENV)
    if chosen:
        if not chosen.isdigit() or int(chosen) < 1:
            raise ValueError(f"${ENV} must be a whole number >= 1 (1: no extra processes), got {chosen!r}")
        return int(chosen)
    if sys.platform != "linux" or int(os.environ.get("WORLD_SIZE", 1)) > 1:
        return 1
    if model is not None and device_of(model).type != "cpu":
        return 1
    return 2 if usable_cores() >= 2 else 1


def strided_shares(items: Sequence, processes: int) -> list[list]:
    """``items`` dealt out to at most ``processes`` non-empty shares: every n-th item from r."""
    shares = [list(items[r::processes]) for r in range(processes)]
    return [share for share in shares if share]


class _Emitter:
    """What a process's work calls: ``result(key, value)`` sends one result, ``advance(n)`` moves
    the caller's progress bar by ``n``."""

    def __init__(self, conn):
        self._conn = conn

    def _send(self, message: tuple) -> None:
        self._conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def result(self, key: Any, value: Any) -> None:
        self._send(("result", key, value))

    def advance(self, n: int) -> None:
        self._send(("advance", n))


def run_forked(
    shares: Sequence[Sequence],
    work: Callable[[Sequence, _Emitter], None],
    *,
    total: int,
    desc: str = "sweep",
    progress: bool = True,
) -> Iterator[tuple[Any, Any]]:
    """Fork one process per share; process r runs ``work(shares[r], emitter)`` on
    ``torch.get_num_threads() // len(shares)`` threads (at least 1). Yields ``(key, value)``
    for each ``emitter.result`` as it arrives; one progress bar of ``total`` counts every
    ``emitter.advance``. Leaving the iterator early stops the processes."""
    threads = max(1, torch.get_num_threads() // len(shares))
    context = get_context("fork")
    children = []
    try:
        for r, share in enumerate(shares):
            receive, send = context.Pipe(duplex=False)
            child = context.Process(
                target=_child, args=(work, share, send, threads), daemon=True, name=f"{desc} process {r}"
            )
            child.start()
            send.close()  # the child holds the other copy; EOF here then means it has gone
            children.append((child, receive))
        yield from _collect(children, total, desc, progress)
    finally:
        for child, receive in children:
            if child.is_alive():
                child.terminate()
            child.join()
            receive.close()


def _collect(children, total: int, desc: str, progress: bool) -> Iterator[tuple[Any, Any]]:
    open_ = {receive: child for child, receive in children}
    with tqdm(total=total, desc=desc, disable=not progress, unit="config") as bar:
        while open_:
            for receive in connection.wait(list(open_)):
                try:
                    message = pickle.loads(receive.recv_bytes())
                except EOFError:
                    child = open_.pop(receive)
                    child.join()
                    raise SweepProcessError(
                        f"{child.name} ended without finishing its share (exit code "
                        f"{child.exitcode}; -9 is usually the kernel's out-of-memory killer). "
                        f"Rerun with ${ENV}=1 to sweep in this process."
                    ) from None
                if message[0] == "result":
                    yield message[1], message[2]
                elif message[0] == "advance":
                    bar.update(message[1])
                elif message[0] == "error":
                    raise SweepProcessError(f"{open_[receive].name} failed:\n{message[1]}")
                else:  # "done"
                    del open_[receive]


def _child(work, share, conn, threads: int) -> None:
    # nothing a child prints may reach the parent's streams (in a notebook, the kernel's sockets)
    sys.stdout = sys.stderr = io.StringIO()
    torch.set_num_threads(threads)
    emitter = _Emitter(conn)
    try:
        work(share, emitter)
        emitter._send(("done",))
    except BaseException:
        emitter._send(("error", traceback.format_exc()))
    finally:
        conn.close()


def in_order(pairs: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """``(index, value)`` pairs arriving in any order, yielded by index 0, 1, 2, ... as soon as
    each one's predecessors have arrived."""
    waiting: dict[int, Any] = {}
    following = 0
    for index, value in pairs:
        waiting[index] = value
        while following in waiting:
            yield following, waiting.pop(following)
            following += 1
