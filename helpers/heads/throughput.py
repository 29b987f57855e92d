"""Inference speed of a classifier, and the speed-up its removed FLOPs predict (paper §4.3, Table 4).

``throughput`` times whole passes over fixed batches (after warm-up passes) and returns examples
per second, one value per repeat. ``forward_flops`` counts the floating-point operations of one
forward pass as it actually runs: 2 * in * out per row for every ``nn.Linear``, plus the two
attention products (Q K^T and A V: 4 * T_q * T_k * head_dim per head) for every attention
site. The ratio of the original's FLOPs to the pruned model's is the speed-up that the
arithmetic alone predicts; memory traffic, kernel launches and Python overhead do not shrink in
proportion, which is why the paper measures only +17.5% at batch 64 for 50% of heads removed.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Sequence

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from .devices import default_device, to_device
from .gates import HeadGates
from .sites import attention_sites

Run = Callable[[nn.Module, dict], object]


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
def throughput(model: nn.Module, batches: Sequence[dict], run: Run, repeats: int = 3, warmup: int = 1) -> list[float]:
    """Examples per second of ``run(model, batch)`` over all ``batches`` (dicts of tensors [B, ...],
    moved to the model's device before the clock starts), one value per repeat, after ``warmup``
    untimed passes."""
    model.eval()
    device = next(model.parameters()).device
    batches = [to_device(b, device) for b in batches]
    n = sum(len(next(iter(b.values()))) for b in batches)
    for _ in range(warmup):
        for batch in batches:
            run(model, batch)
    _sync(device)
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for batch in batches:
            run(model, batch)
        _sync(device)
        out.append(n / (time.perf_counter() - start))
    return out


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _widths(module: nn.Module) -> tuple[int, int] | None:
    """(in, out) of an ``nn.Linear`` or of transformers' ``Conv1D`` (GPT-2: weight [in, out]); else None."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if type(module).__name__ == "Conv1D":
        return module.nx, module.nf
    return None


@torch.inference_mode()
def forward_flops(model: nn.Module, batch: dict, run: Run) -> int:
    """FLOPs of one ``run(model, batch)``: linear layers (``nn.Linear``, GPT-2's ``Conv1D``) as
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
        run(model, batch)
    finally:
        for h in handles:
            h.remove()
    return total


def compare_speed(model: nn.Module, pruned: nn.Module, masked: dict, batches_by_size: dict[int, Sequence[dict]],
                  run: Run, repeats: int = 3, warmup: int = 1, progress: bool = True) -> pd.DataFrame:
    """Table 4's measurement: for each batch size, examples per second of the ``original``
    model, the physically ``pruned`` one, and the original ``gated`` with ``masked`` heads set
    to zero (masked, not removed), with FLOPs per pass. Repeats alternate between the three
    variants, and each variant leads in turn, so that neither a slow spell of the machine nor
    the position in the rotation favours one of them.

    Returns rows of batch_size, variant, mean and std (examples/s), runs (the raw rates), flops.
    """
    rows = []
    for size, batches in tqdm(batches_by_size.items(), desc="batch sizes", disable=not progress):
        rates: dict[str, list[float]] = {"original": [], "pruned": [], "gated": []}
        with HeadGates(model) as gates:
            variants = {"original": (model, lambda: gates.reset()), "pruned": (pruned, lambda: None),
                        "gated": (model, lambda: gates.mask(masked))}
            names = list(variants)
            for r in range(repeats):
                for name in names[r % len(names):] + names[:r % len(names)]:  # each variant leads in turn
                    m, prepare = variants[name]
                    prepare()
                    rates[name] += throughput(m, batches, run, repeats=1, warmup=warmup if r == 0 else 0)
            gates.reset()
        flops = {"original": sum(forward_flops(model, b, run) for b in batches),
                 "pruned": sum(forward_flops(pruned, b, run) for b in batches)}
        flops["gated"] = flops["original"]
        for name, values in rates.items():
            mean, std = mean_std(values)
            rows.append({"batch_size": size, "variant": name, "mean": mean, "std": std, "runs": values,
                         "flops": flops[name]})
    return pd.DataFrame(rows)
