"""Inference speed of a classifier, and the speed-up its removed FLOPs predict (paper §4.3, Table 4).

``throughput`` times whole passes over fixed batches (after warm-up passes) and returns examples
per second, one value per repeat; tables report their median and interquartile range.
``forward_flops`` counts the floating-point operations of one forward pass as it actually runs:
2 * in * out per row for every ``nn.Linear``, plus the two attention products (Q K^T and A V:
4 * T_q * T_k * head_dim per head) for every attention site. The ratio of the original's FLOPs to
the pruned model's is the speed-up that the arithmetic alone predicts; memory traffic, kernel
launches and Python overhead do not shrink in proportion, which is why the paper measures only
+17.5% at batch 64 for 50% of heads removed.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ..base import ledger
from ..base.devices import default_device, to_device
from ..heads.gates import HeadGates
from ..heads.sites import attention_sites

Forward = Callable[[nn.Module, dict], object]


def device_name(device: torch.device | None = None) -> str:
    """``"cuda: <GPU name>"`` or ``"cpu: <n> threads"`` for ``device`` (default: where
    ``course`` puts models, ``devices.default_device()``)."""
    device = device or default_device()
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"{device.type}: {torch.get_num_threads()} threads"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.inference_mode()
def throughput(
    model: nn.Module, batches: Sequence[dict], *, forward: Forward, repeats: int = 3, warmup: int = 1
) -> list[float]:
    """Examples per second of ``forward(model, batch)`` over all ``batches`` (dicts of tensors [B, ...],
    moved to the model's device before the clock starts), one value per repeat, after ``warmup``
    untimed passes."""
    model.eval()
    device = next(model.parameters()).device
    batches = [to_device(b, device) for b in batches]
    n = sum(len(next(iter(b.values()))) for b in batches)
    for _ in range(warmup):
        for batch in batches:
            forward(model, batch)
    _sync(device)
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for batch in batches:
            forward(model, batch)
        _sync(device)
        out.append(n / (time.perf_counter() - start))
    return out


def median_iqr(values: Sequence[float]) -> tuple[float, float]:
    """The median of ``values`` and their interquartile range (0 for fewer than two values): the
    centre and spread that one disturbed run cannot move far, unlike a mean and a standard
    deviation (timing tools report them for that reason)."""
    if len(values) < 2:
        return float(values[0]), 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q3 - q1


def _widths(module: nn.Module) -> tuple[int, int] | None:
    """(in, out) of an ``nn.Linear`` or of transformers' ``Conv1D`` (GPT-2: weight [in, out]); else None."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if type(module).__name__ == "Conv1D":
        return module.nx, module.nf
    return None


@torch.inference_mode()
def forward_flops(model: nn.Module, batch: dict, forward: Forward) -> int:
    """FLOPs of one ``forward(model, batch)``: linear layers (``nn.Linear``, GPT-2's ``Conv1D``) as
    they run, plus each attention site's score and value products, from the shape of its output
    projection's input [B, T, H * d] (self-attention over the whole input, T_k = T_q: encoders,
    and decoder-only models scoring a text in one pass; under grouped-query attention H counts
    query heads)."""
    total = 0
    batch = to_device(batch, model)
    out_projections = {site.output: site for site in attention_sites(model)}

    def count(module, args, output):
        nonlocal total
        x = args[0]
        width_in, width_out = _widths(module)
        if width_in == 0:  # a layer whose heads were all pruned
            return
        rows = x.numel() // width_in
        total += 2 * rows * width_in * width_out
        site = out_projections.get(module)
        if site is not None:
            if site.kind != "self":
                raise ValueError("forward_flops counts self-attention of single-stack models only")
            seq = x.shape[1] if x.dim() == 3 else 1
            total += 4 * rows * seq * width_in  # [B*T rows] x T keys x (H * d)

    handles = [m.register_forward_hook(count) for m in model.modules() if _widths(m) is not None]
    try:
        forward(model, batch)
    finally:
        for h in handles:
            h.remove()
    return total


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
EAGER = "eager"
"""``compile_mode`` for a model run as it is, op by op; any other value is a ``torch.compile`` mode:
``"reduce-overhead"`` records CUDA graphs, which removes the per-kernel launch cost that bounds a
GPU at small batches."""


def dtype_of(name: str | torch.dtype) -> torch.dtype:
    """``torch.float16`` for ``"float16"`` (or a ``torch.dtype`` as given); a clear error otherwise."""
    if isinstance(name, torch.dtype):
        return name
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; use one of {sorted(DTYPES)}")
    return DTYPES[name]


def cast_copy(model: nn.Module, dtype: str | torch.dtype = "float32") -> nn.Module:
    """A copy of ``model`` in evaluation mode with its parameters and buffers cast to ``dtype``."""
    return copy.deepcopy(model).to(dtype_of(dtype)).eval()


def compiled(model: nn.Module, compile_mode: str = EAGER, backend: str = "inductor") -> nn.Module:
    """``model`` itself for ``"eager"``, else ``torch.compile(model, mode=compile_mode, backend=backend)``
    (``"default"``: torch's default mode). Hooks installed before the call (head gates) are
    compiled with it."""
    if compile_mode == EAGER:
        return model
    return torch.compile(model, mode=None if compile_mode == "default" else compile_mode, backend=backend)


def compare_speed(
    model: nn.Module,
    pruned: nn.Module,
    *,
    masked: dict,
    batches_by_size: dict[int, Sequence[dict]],
    forward: Forward,
    repeats: int = 3,
    warmup: int = 2,
    progress: bool = True,
    dtype: str | torch.dtype = "float32",
    compile_mode: str = EAGER,
    backend: str = "inductor",
) -> pd.DataFrame:
    """Table 4's measurement: for each batch size, examples per second of the ``original``
    model, the physically ``pruned`` one, and the original ``gated`` with ``masked`` heads set
    to zero (masked, not removed: ``HeadGates`` hooks), with FLOPs per pass. Repeats alternate
    between the three variants, and each variant leads in turn, so that neither a slow spell of
    the machine nor the position in the rotation favours one of them.

    Each variant is a copy in ``dtype`` (``"float32"``, ``"float16"``, ``"bfloat16"``), compiled
    when ``compile_mode`` is a ``torch.compile`` mode (``"reduce-overhead"``: CUDA graphs); the
    models passed in are left as they are. A compiled copy is warmed up with at least three
    passes over each batch size (compilation, then CUDA-graph recording) before the clock
    starts: give it batches of one shape per size. FLOPs are counted on ``model`` and ``pruned``
    (they do not depend on the dtype).

    Each variant runs ``warmup`` untimed passes over a batch size before its first timed one.
    Returns rows of batch_size, variant, median and iqr (interquartile range) of the rates
    (examples/s; ``median_iqr``), runs (the raw rates, in order), flops, dtype and compile_mode.
    """
    examples = sum(len(next(iter(b.values()))) for bs in batches_by_size.values() for b in bs)
    with ledger.entry(
        "timing runs", f"speed: original, pruned, gated ({dtype})", model=model, examples=examples, configs=3
    ):
        return _compare_speed(
            model,
            pruned,
            masked=masked,
            batches_by_size=batches_by_size,
            forward=forward,
            repeats=repeats,
            warmup=warmup,
            progress=progress,
            dtype=dtype,
            compile_mode=compile_mode,
            backend=backend,
        )


def _compare_speed(
    model, pruned, *, masked, batches_by_size, forward, repeats, warmup, progress, dtype, compile_mode, backend
) -> pd.DataFrame:
    dtype_name = str(dtype_of(dtype)).removeprefix("torch.")
    if compile_mode != EAGER:
        warmup = max(warmup, 3)
    timed_forward = forward
    if compile_mode == "reduce-overhead" and hasattr(torch.compiler, "cudagraph_mark_step_begin"):

        def timed_forward(m, batch):  # each pass is a new CUDA-graph step: its outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
            return forward(m, batch)

    gated_model = cast_copy(model, dtype)
    rows = []
    with HeadGates(gated_model) as gates:
        gates.mask(masked)
        variants = {
            "original": compiled(cast_copy(model, dtype), compile_mode, backend),
            "pruned": compiled(cast_copy(pruned, dtype), compile_mode, backend),
            "gated": compiled(gated_model, compile_mode, backend),
        }
        names = list(variants)
        for size, batches in tqdm(batches_by_size.items(), desc="batch sizes", disable=not progress):
            rates: dict[str, list[float]] = {name: [] for name in names}
            for r in range(repeats):
                for name in names[r % len(names) :] + names[: r % len(names)]:  # each variant leads in turn
                    rates[name] += throughput(
                        variants[name], batches, forward=timed_forward, repeats=1, warmup=warmup if r == 0 else 0
                    )
            flops = {
                "original": sum(forward_flops(model, b, forward) for b in batches),
                "pruned": sum(forward_flops(pruned, b, forward) for b in batches),
            }
            flops["gated"] = flops["original"]
            for name, values in rates.items():
                median, iqr = median_iqr(values)
                rows.append(
                    {
                        "batch_size": size,
                        "variant": name,
                        "median": median,
                        "iqr": iqr,
                        "runs": values,
                        "flops": flops[name],
                        "dtype": dtype_name,
                        "compile_mode": compile_mode,
                    }
                )
    return pd.DataFrame(rows)


def with_gains(name: str, table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``{name: table, name + "_gains": speed_gains(table)}``: timed rows and their speed-ups, as a
    chapter saves them."""
    return {name: table, f"{name}_gains": speed_gains(table)}


def speed_gains(table: pd.DataFrame) -> pd.DataFrame:
    """From ``compare_speed`` rows (of one or more settings): one row per dtype, compile mode and
    batch size with the measured speed-ups of the pruned and the gated model over the original
    (ratio of median rates minus one), the speed-up the FLOPs predict, the share of that
    prediction the pruned model realises, and (where the rows have an ``iqr``) the timing
    ``noise``: the larger interquartile range over median of the original and the gated model."""
    keys = [k for k in ("dtype", "compile_mode") if k in table.columns] + ["batch_size"]
    rows = []
    for key, part in table.groupby(keys, sort=False):
        by = part.set_index("variant")
        predicted = by.loc["original", "flops"] / by.loc["pruned", "flops"] - 1
        measured = by.loc["pruned", "median"] / by.loc["original", "median"] - 1
        rows.append(
            dict(
                zip(keys, key if isinstance(key, tuple) else (key,)),
                pruned=measured,
                gated=by.loc["gated", "median"] / by.loc["original", "median"] - 1,
                predicted=predicted,
                share_of_predicted=measured / predicted if predicted else float("nan"),
                **(
                    {"noise": max(by.loc[v, "iqr"] / by.loc[v, "median"] for v in ("original", "gated"))}
                    if "iqr" in by
                    else {}
                ),
            )
        )
    return pd.DataFrame(rows)
