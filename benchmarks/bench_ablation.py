"""Speed of the one-head ablation sweep that replays lower layers, against the naive loop.

The naive loop evaluates the whole model once per head (72 full evaluations for MiniLM's
6 x 12 heads); the sweep recomputes only the ablated layer and those above it. The floor for
6 layers is 21/36 = 0.58 of the naive time (layers evaluated); the target is at most 0.7.
Both variants run in this one process, alternating, on the same batches of the generated NLI
matched split; the script checks that their outputs are identical and prints the ratio.

Run: .venv/bin/python benchmarks/bench_ablation.py [--examples N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from helpers.base.denormals import flush_denormals
from helpers.sweeps.ablation import one_head_configs, single_layer_sweep
from helpers.zoo.classifier_training import batches, encode
from helpers.zoo.nli_task import generate
from helpers.zoo.registry import load_encoder


def main() -> None:
    flush_denormals()  # before torch starts its threads (helpers/base/denormals.py)
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    model, tokenizer = load_encoder("minilm", num_labels=3)
    examples = generate({"matched": args.examples})["matched"]
    data = list(batches(encode(tokenizer, examples, 48), args.batch_size))
    configs = one_head_configs(model)

    def run(m, batch):
        return m(**batch).logits

    times = {True: [], False: []}
    results = {}
    for _ in range(args.rounds):
        for reuse in (False, True):
            start = time.perf_counter()
            results[reuse] = single_layer_sweep(model, data, run, configs, reuse=reuse, progress=False)
            times[reuse].append(time.perf_counter() - start)
    identical = torch.equal(results[True][0], results[False][0]) and all(
        torch.equal(results[True][1][c], results[False][1][c]) for c in configs
    )
    naive, fast = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"MiniLM-L6 (6 x 12 heads), {len(configs)} one-head ablations, {args.examples} examples, "
        f"{torch.get_num_threads()} threads, medians of {args.rounds} rounds"
    )
    print(f"  naive loop (one full evaluation per head): {naive:.1f} s")
    print(f"  sweep replaying lower layers:              {fast:.1f} s")
    print(f"  sweep / naive: {fast / naive:.3f}   (floor 0.58, target <= 0.7)")
    print(f"  outputs identical: {identical}")


if __name__ == "__main__":
    main()
