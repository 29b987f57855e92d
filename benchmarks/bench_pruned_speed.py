"""Speed of MiniLM with half of its heads physically removed, against the FLOP prediction (§4.3).

Half of the 72 heads (the least important, by I_h on generated NLI examples) are removed with
``helpers.prune_heads``. For each batch size the script times the original, the pruned and the
gated model (heads masked, not removed) in one process, alternating repeats, and prints the
measured pruned/original throughput ratio next to the ratio of their FLOPs, which is the
speed-up the removed arithmetic alone predicts. Target: at batch 64 the measured speed-up
reaches at least 80% of the predicted one, i.e. (measured - 1) >= 0.8 * (predicted - 1).

Run: .venv/bin/python benchmarks/bench_pruned_speed.py [--examples N] [--repeats R]
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import helpers
from helpers.zoo.classifier_training import batches, encode
from helpers.heads.pruning import count_parameters
from helpers.zoo.registry import load_encoder
from helpers.zoo.nli_task import generate
from helpers.heads.pruning_curves import heads_of, order_by_importance, spec_of
from helpers.zoo.scorers import classifier_loss, classifier_loss_batches
from helpers.heads.throughput import compare_speed, device_name


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=512, help="examples timed per batch size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--share", type=float, default=0.5, help="share of heads removed")
    args = parser.parse_args()

    model, tokenizer = load_encoder("minilm", num_labels=3)
    data = generate({"train": 256, "matched": args.examples}, seed=0)
    importance = helpers.head_importance(model, classifier_loss_batches(tokenizer, data["train"], 48), classifier_loss,
                                         progress=False)
    pool = heads_of(model)
    removed = round(args.share * len(pool))
    spec = spec_of(order_by_importance(importance, pool)[:removed])
    pruned = copy.deepcopy(model)
    helpers.prune_heads(pruned, spec)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    pruned.to(device)
    encoded = encode(tokenizer, data["matched"], 48)
    by_size = {size: [{k: v.to(device) for k, v in b.items()} for b in batches(encoded, size)] for size in (1, 4, 16, 64)}

    def run(m, batch):
        return m(**batch).logits

    table = compare_speed(model, pruned, spec, by_size, run, repeats=args.repeats, progress=False)
    print(f"MiniLM-L6, {len(pool) - removed} of {len(pool)} heads kept; parameters "
          f"{count_parameters(model):,} -> {count_parameters(pruned):,}; {args.examples} examples per batch size, "
          f"{args.repeats} alternating repeats; {device_name()}")
    print(f"{'batch':>5}  {'original ex/s':>15}  {'pruned ex/s':>15}  {'gated ex/s':>15}  {'measured':>8}  "
          f"{'predicted':>9}  {'share of predicted gain':>23}  {'paired (share)':>15}")
    for size, part in table.groupby("batch_size"):
        row = part.set_index("variant")
        measured = row.loc["pruned", "mean"] / row.loc["original", "mean"]
        predicted = row.loc["original", "flops"] / row.loc["pruned", "flops"]
        paired = statistics.median(p / o for p, o in zip(row.loc["pruned", "runs"], row.loc["original", "runs"]))
        cells = "  ".join(f"{row.loc[v, 'mean']:8.1f} ± {row.loc[v, 'std']:4.1f}" for v in ("original", "pruned", "gated"))
        print(f"{size:>5}  {cells}  {measured:8.3f}  {predicted:9.3f}  {(measured - 1) / (predicted - 1):23.0%}  "
              f"{paired:8.3f} ({(paired - 1) / (predicted - 1):4.0%})")
    print("measured: ratio of mean rates; paired: median over rounds of pruned/original timed back to back")
    print("target: at batch 64, share of predicted gain >= 80%")


if __name__ == "__main__":
    main()
