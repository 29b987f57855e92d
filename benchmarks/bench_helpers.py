"""Overhead of head gates and cost of an importance pass, measured in one run.

Prints two ratios (issue targets in brackets):
  forward with gates of ones / forward without gates           [<= 1.05]
  importance pass (forward+backward) / forward-only evaluation [<= 3]
and, for information, the forward with one head masked (the hook really multiplying).

Timings alternate the compared variants round by round and report medians, so drift in machine
load hits both alike. Run: .venv/bin/python benchmarks/bench_helpers.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F

import helpers
from helpers.base.denormals import flush_denormals
from helpers.zoo.shipped import minilm_dir


def minilm_batches(n_batches: int, batch_size: int, length: int, seed: int = 0):
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(minilm_dir(), num_labels=3).eval()
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n_batches):
        ids = torch.randint(1000, 20000, (batch_size, length), generator=g)
        ids[:, 0] = 101
        batches.append(
            {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "labels": torch.randint(0, 3, (batch_size,), generator=g),
            }
        )
    return model, batches


def forward_all(model, batches):
    with torch.no_grad():
        for b in batches:
            model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])


def loss_fn(model, b):
    logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    return F.cross_entropy(logits, b["labels"], reduction="none")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(variants: dict, rounds: int) -> dict[str, float]:
    """Median seconds of each variant, run in turn ``rounds`` times after one warm-up each."""
    for fn in variants.values():
        fn()
    times = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            times[name].append(timed(fn))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    flush_denormals()  # before torch starts its threads (helpers/base/denormals.py)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    args = parser.parse_args()

    model, batches = minilm_batches(args.batches, args.batch_size, args.length)
    print(
        f"MiniLM-L6-H384 (6 x 12 heads), {args.batches} batches of {args.batch_size} x {args.length} tokens, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.rounds} rounds"
    )

    ones = helpers.HeadGates(model)
    masked = helpers.HeadGates(model)
    masked.mask({"self": {3: [5]}})

    def with_gates(gates):
        def run():
            with gates:
                forward_all(model, batches)

        return run

    t = alternate(
        {"plain": lambda: forward_all(model, batches), "ones": with_gates(ones), "masked": with_gates(masked)},
        args.rounds,
    )
    print(f"forward, no gates           {t['plain'] * 1e3:8.1f} ms")
    print(
        f"forward, gates of ones      {t['ones'] * 1e3:8.1f} ms   ratio {t['ones'] / t['plain']:.3f}  [target <= 1.05]"
    )
    print(
        f"forward, one head masked    {t['masked'] * 1e3:8.1f} ms   ratio {t['masked'] / t['plain']:.3f}  (hook "
        "multiplies)"
    )

    t = alternate(
        {
            "eval": lambda: forward_all(model, batches),
            "importance": lambda: helpers.head_importance(model, batches, loss_fn, progress=False),
        },
        args.rounds,
    )
    print(f"forward-only evaluation     {t['eval'] * 1e3:8.1f} ms")
    print(
        f"importance pass             {t['importance'] * 1e3:8.1f} ms   ratio {t['importance'] / t['eval']:.3f}  "
        "[target <= 3]"
    )


if __name__ == "__main__":
    main()
