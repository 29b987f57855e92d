"""Split a head-masking sweep over several processes: GPUs of one machine, or several machines.

Start the runner under a launcher that sets ``RANK`` and ``WORLD_SIZE`` (torchrun does; so does
accelerate), for example on one machine with 8 GPUs::

    torchrun --nproc_per_node 8 -m helpers.runner --profile paper --only 03_ablating_one_head

Every process executes the same notebook. Rank 0 builds missing models while the others wait for
them. In each sweep, process ``r`` computes the configurations ``r, r + n, r + 2n, ...`` that the
sweep cache lacks and writes each to the cache as it finishes; then every process waits until
the cache holds all of them and goes on with the whole result, so the notebook never knows. On
several machines the cache (``$SIXTEEN_HEADS_CACHE``) must be one shared folder. Only rank 0
keeps its executed notebook and run time. A restarted job computes only what is still missing.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
POLL_SECONDS = 2.0


def rank() -> int:
    return int(os.environ.get("RANK", 0))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", 1))


def timeout() -> float:
    """Seconds to wait for the other processes: ``$SIXTEEN_HEADS_SHARD_TIMEOUT``, default 2 days."""
    return float(os.environ.get("SIXTEEN_HEADS_SHARD_TIMEOUT", 2 * 24 * 3600))


def my_share(items: Sequence[T]) -> list[T]:
    """The items this process computes: every ``world_size()``-th, from its rank."""
    return list(items[rank()::world_size()])


def wait_until(done: Callable[[], int], total: int, what: str) -> None:
    """Poll ``done()`` (how many of ``total`` are finished) until it reaches ``total``."""
    start = time.monotonic()
    with tqdm(total=total, desc=f"waiting for {what}", unit="item", leave=False) as bar:
        while (n := done()) < total:
            bar.update(n - bar.n)
            if time.monotonic() - start > timeout():
                raise TimeoutError(f"rank {rank()} waited {timeout():.0f} s for {what}: {n} of {total} arrived. "
                                   f"Did another process fail? Rerun the same command: finished work is cached.")
            time.sleep(POLL_SECONDS)


def wait_for_file(path: Path, what: str) -> None:
    wait_until(lambda: int(path.exists()), 1, what)
