"""No denormal arithmetic: flush-to-zero for every thread of a process, and weights saved without denormals.

A float32 below 1.18e-38 in magnitude (``torch.finfo(torch.float32).tiny``) is *denormal*. On
x86 CPUs an operation with a denormal operand or result leaves the vector units for a slow
microcode path: on the course's 2-core Xeon a 512 x 512 float32 matmul with denormal operands
took 0.40 s against 0.0027 s (150 times slower, one thread; ``benchmarks/bench_denormals.py``).
Training from scratch with weight decay and Adam makes them: a course translation checkpoint
held 0.47% denormal weights and 2.5% denormal Adam moments, and its training epochs slowed from
144 s to 1,617 s as they accumulated. In float32 such values are 38 orders of magnitude below
the weights they sit beside, so computing them as zeros changes no result a reader can see.

Two CPU modes remove the penalty: *flush to zero* (FTZ: a denormal result is written as 0) and
*denormals are zero* (DAZ: a denormal operand is read as 0); ``torch.set_flush_denormal(True)``
sets both. They live in a per-thread register (MXCSR), and a new thread copies the register of
the thread that starts it, so torch's worker threads get the mode only if it is set before the
first parallel operation starts them. ``flush_denormals`` is therefore called first thing where
this project's processes start work: every chapter's kernel (the runner starts it with
``KERNEL_ARGUMENTS``), ``make models`` and its spawned workers, the benchmarks and the tests; it
checks that every thread flushes (``flushes_in_every_thread``), and forked processes inherit it.
Importing the library does not set it: a process that imports ``helpers.heads`` keeps its own
float mode (run a chapter by hand in Jupyter and call it in the first cell to time it as the book does).
``$SIXTEEN_HEADS_KEEP_DENORMALS=1`` keeps IEEE denormals (to measure the penalty).

``zero_denormals_`` sets denormal weights to zero, so that a saved model is fast in any process,
with or without the mode; ``helpers.save_pruned`` applies it before writing.
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterable

import torch
from torch import nn

_KEEP_ENV = "SIXTEEN_HEADS_KEEP_DENORMALS"
_ELEMENTS_PER_THREAD = 1 << 17  # above torch's grain size (32,768), so an elementwise op reaches every thread


def flush_denormals() -> bool:
    """Set flush-to-zero (FTZ and DAZ) for this thread and, if called before torch started its
    worker threads, for them; warn when a worker thread still computes denormals. Returns
    whether every thread flushes (False also where the CPU has no such mode, or where
    ``$SIXTEEN_HEADS_KEEP_DENORMALS`` is set to 1)."""
    if os.environ.get(_KEEP_ENV) == "1":
        return False
    if not torch.set_flush_denormal(True):  # a CPU without FTZ/DAZ (not x86 with SSE3): nothing to do
        return False
    if flushes_in_every_thread():
        return True
    warnings.warn(
        "flush-to-zero holds in this thread but not in all of torch's worker threads, which were "
        "started before it was set: call helpers.base.denormals.flush_denormals() before running any "
        "torch operation, else arithmetic on denormal floats runs up to "
        "150 times slower on the CPU",
        RuntimeWarning,
        stacklevel=2,
    )
    return False


def flushes_in_every_thread() -> bool:
    """Whether every intra-op thread of torch reads a denormal as zero: an elementwise product
    over ``_ELEMENTS_PER_THREAD`` values per thread, all denormal, split across the threads by
    torch, is all zeros only where each thread flushes."""
    tiny = torch.finfo(torch.float32).tiny
    x = torch.full((_ELEMENTS_PER_THREAD * torch.get_num_threads(),), tiny / 64, dtype=torch.float32)
    return not bool((x * 1.5).any())


def count_denormals(tensors: Iterable[torch.Tensor] | nn.Module) -> int:
    """How many values of the floating-point ``tensors`` (or of a module's parameters and
    buffers) are denormal: nonzero and below their dtype's smallest normal magnitude."""
    return sum(int(_denormal(t).sum()) for t in _float_tensors(tensors))


@torch.no_grad()
def zero_denormals_(tensors: Iterable[torch.Tensor] | nn.Module) -> int:
    """Set every denormal value of ``tensors`` (or of a module's parameters and buffers) to zero,
    in place; returns how many there were. Under flush-to-zero this changes no computation: the
    CPU already reads them as zero."""
    changed = 0
    for t in _float_tensors(tensors):
        mask = _denormal(t)
        n = int(mask.sum())
        if n:
            t.masked_fill_(mask, 0.0)
            changed += n
    return changed


def _float_tensors(tensors: Iterable[torch.Tensor] | nn.Module) -> list[torch.Tensor]:
    if isinstance(tensors, nn.Module):
        tensors = [*tensors.parameters(), *tensors.buffers()]
    return [t for t in tensors if t.dtype in _BITS]


_BITS = {  # dtype: (integer view, exponent mask, mantissa mask)
    torch.float64: (torch.int64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF),
    torch.float32: (torch.int32, 0x7F800000, 0x007FFFFF),
    torch.float16: (torch.int16, 0x7C00, 0x03FF),
    torch.bfloat16: (torch.int16, 0x7F80, 0x007F),
}


def _denormal(t: torch.Tensor) -> torch.Tensor:
    """Read from the bits (zero exponent, nonzero mantissa): under flush-to-zero any arithmetic on
    a denormal, even ``abs`` or a comparison, sees a zero."""
    view, exponent, mantissa = _BITS[t.dtype]
    bits = t.detach().contiguous().view(view)
    return ((bits & exponent) == 0) & ((bits & mantissa) != 0)


def timed(run: Callable[[], object], flush: bool, repeats: int = 5) -> float:
    """Median seconds of ``run()`` over ``repeats`` calls after one warm-up, in one thread, with
    flush-to-zero on or off for the call (then as ``flush_denormals`` left it). One thread, because
    the mode can be switched only in the calling thread once torch's workers exist."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(flush)
    try:
        run()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    finally:
        torch.set_flush_denormal(os.environ.get(_KEEP_ENV) != "1")
        torch.set_num_threads(threads)
    return statistics.median(times)


def matmul_penalty(size: int = 512, repeats: int = 5, seed: int = 0) -> dict[str, tuple[float, float]]:
    """Seconds of a ``size`` x ``size`` float32 matmul (median of ``repeats``, one thread) with
    normal operands and with operands scaled into the denormal range: ``{operands: (seconds with
    flush-to-zero off, seconds with it on)}``."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(size, size, generator=g), torch.randn(size, size, generator=g)
    small = _denormals_like(a, g)
    return {
        name: (
            timed(lambda x=x: x @ b, flush=False, repeats=repeats),
            timed(lambda x=x: x @ b, flush=True, repeats=repeats),
        )
        for name, x in (("normal operands", a), ("denormal operands", small))
    }


@torch.no_grad()
def plant_denormals_(model: nn.Module, share: float, seed: int = 0) -> int:
    """Set ``share`` of ``model``'s weight values (those of smallest magnitude, as weight decay
    leaves them) to denormal values of the same sign, in place: a stand-in for a model trained
    without flush-to-zero, for measuring what the mode saves. Returns how many were set."""
    weights = [p for p in model.parameters() if p.is_floating_point()]
    flat = torch.cat([p.detach().abs().flatten() for p in weights])
    k = int(share * flat.numel())
    flat = flat[flat > 0]  # zeros (fresh biases) stay zeros
    k = min(k, flat.numel())
    if k == 0:
        return 0
    threshold = torch.kthvalue(flat, k).values
    g = torch.Generator().manual_seed(seed)
    planted = 0
    for p in weights:
        chosen = (p.abs() <= threshold) & (p != 0)
        p.copy_(torch.where(chosen, _denormals_like(p.detach().float(), g).to(p.dtype), p))
        planted += int(chosen.sum())
    return planted


def _denormals_like(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """A float32 tensor of ``x``'s shape and signs whose every value is denormal, made from bit
    patterns (zero exponent, random nonzero mantissa): arithmetic would not do, because under
    flush-to-zero a product that lands in the denormal range is written as zero."""
    mantissa = torch.randint(1, 2**23, x.shape, generator=generator, dtype=torch.int32)
    sign = torch.where(
        x.detach().cpu() < 0, torch.tensor(-(2**31), dtype=torch.int32), torch.tensor(0, dtype=torch.int32)
    )
    return (mantissa | sign).view(torch.float32).to(x.device)
