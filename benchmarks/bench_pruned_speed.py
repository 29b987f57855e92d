"""Speed of MiniLM with half of its heads physically removed, against the FLOP prediction (§4.3).

Half of the 72 heads (the least important, by I_h on generated NLI examples) are removed with
``helpers.prune_heads``. For each batch size the script times the original, the pruned and the
gated model (heads masked, not removed) in one process, alternating repeats, and prints the
measured pruned/original throughput ratio next to the ratio of their FLOPs, which is the
speed-up the removed arithmetic alone predicts. Target: at batch 64 the measured speed-up
reaches at least 80% of the predicted one, i.e. (measured - 1) >= 0.8 * (predicted - 1).

``--dtype`` (float32, float16, bfloat16; several allowed) times copies in that precision and
``--compile`` (eager, reduce-overhead, default, max-autotune; several allowed) compiles them with
``torch.compile`` in that mode; "reduce-overhead" records CUDA graphs, the way to take kernel
launches out of the time on a GPU. Compiled settings time batches padded to one width.

Run: .venv/bin/python benchmarks/bench_pruned_speed.py [--examples N] [--repeats R]
         [--dtype float32 float16 bfloat16] [--compile eager reduce-overhead] [--batch-sizes 1 64]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import helpers
from helpers.base.denormals import flush_denormals
from helpers.heads.gates import heads_of, spec_of
from helpers.heads.pruning import count_parameters
from helpers.sweeps.pruning_curves import order_by_importance
from helpers.sweeps.throughput import DTYPES, EAGER, compare_speed, device_name, speed_gains
from helpers.zoo.classifier_training import batches, encode
from helpers.zoo.nli_task import generate
from helpers.zoo.registry import load_encoder
from helpers.zoo.scorers import classifier_loss, classifier_loss_batches


def main() -> None:
    flush_denormals()  # before torch starts its threads (helpers/base/denormals.py)
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=512, help="examples timed per batch size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--share", type=float, default=0.5, help="share of heads removed")
    parser.add_argument("--dtype", nargs="+", default=["float32"], choices=sorted(DTYPES))
    parser.add_argument(
        "--compile", nargs="+", default=[EAGER], choices=[EAGER, "default", "reduce-overhead", "max-autotune"]
    )
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 4, 16, 64])
    args = parser.parse_args()

    model, tokenizer = load_encoder("minilm", num_labels=3)
    data = generate({"train": 256, "matched": args.examples}, seed=0)
    importance = helpers.head_importance(
        model, classifier_loss_batches(tokenizer, data["train"], 48), classifier_loss, progress=False
    )
    pool = heads_of(model)
    removed = round(args.share * len(pool))
    spec = spec_of(order_by_importance(importance, pool)[:removed])
    pruned = copy.deepcopy(model)
    helpers.prune_heads(pruned, spec)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    pruned.to(device)
    encoded = encode(tokenizer, data["matched"], 48)

    def run(m, batch):
        return m(**batch).logits

    print(
        f"MiniLM-L6, {len(pool) - removed} of {len(pool)} heads kept; parameters "
        f"{count_parameters(model):,} -> {count_parameters(pruned):,}; {args.examples} examples per batch size, "
        f"{args.repeats} alternating repeats; {device_name()}"
    )
    print(
        f"{'dtype':>8}  {'mode':>15}  {'batch':>5}  {'original ex/s':>15}  {'pruned ex/s':>15}  {'gated ex/s':>15}  "
        f"{'measured':>8}  {'predicted':>9}  {'share of predicted gain':>23}  {'paired (share)':>15}"
    )
    for mode in args.compile:
        by_size = {
            size: [{k: v.to(device) for k, v in b.items()} for b in batches(encoded, size, trim=mode == EAGER)]
            for size in args.batch_sizes
        }
        for dtype in args.dtype:
            table = compare_speed(
                model, pruned, spec, by_size, run, repeats=args.repeats, progress=False, dtype=dtype, compile_mode=mode
            )
            gains = speed_gains(table).set_index("batch_size")
            for size, part in table.groupby("batch_size"):
                row = part.set_index("variant")
                g = gains.loc[size]
                paired = statistics.median(
                    p / o for p, o in zip(row.loc["pruned", "runs"], row.loc["original", "runs"])
                )
                cells = "  ".join(
                    f"{row.loc[v, 'median']:8.1f} ±{row.loc[v, 'iqr']:5.1f}" for v in ("original", "pruned", "gated")
                )
                print(
                    f"{dtype:>8}  {mode:>15}  {size:>5}  {cells}  {1 + g['pruned']:8.3f}  {1 + g['predicted']:9.3f}  "
                    f"{g['share_of_predicted']:23.0%}  {paired:8.3f} ({(paired - 1) / g['predicted']:4.0%})"
                )
    print("rates: median ± interquartile range of the repeats, after two untimed warm-up passes")
    print("measured: ratio of median rates; paired: median over rounds of pruned/original timed back to back")
    print("target: at batch 64, share of predicted gain >= 80% (on a GPU: in half precision too)")


if __name__ == "__main__":
    main()
