"""Sweep time of the course models' one-head ablations: the path before issue 19 against today's.

* Translation: the course translation model's 144 one-head configurations (3 kinds x 6 layers
  x 8 heads) plus the unmasked run on ``test13``, greedy, stopping 24 tokens beyond the source
  (the course chapters' settings). Before: one beam search per configuration. Now:
  ``TRANSLATION_CONFIGS_PER_PASS`` configurations share each search (row gates on a repeated
  batch), and decoder-only passes share the encoder's output.
* Classifier: the NLI classifier's 72 configurations on ``matched``, lower layers replayed in
  both. Before: batches in the split's order, the whole forward. Now: batches from the shortest
  example to the longest, ``CLASSIFIER_CONFIGS_PER_PASS`` configurations per pass, the last layer
  at the first token only (``first_token_only``), as ``classifier_effects`` runs it.

"Before" runs in this process on all of torch's threads. "Now" runs twice: in this process, and
split over ``sweep_processes`` forked processes (``helpers/heads/forked.py``; on a CPU of 2 or
more cores, 2 processes of half the threads each), which is how the chapters run it. All on the
first training seed's model; the script checks that every path gives the same hypotheses and
predictions. It needs the course models (``make models``); it prints ratios, it asserts nothing
about time.

Run: .venv/bin/python benchmarks/bench_sweeps.py [--profile course] [--examples N] [--only translation|classifier]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from helpers.book import course
from helpers.book.head_effects import CLASSIFIER_CONFIGS_PER_PASS, TRANSLATION_CONFIGS_PER_PASS, translation_sweep
from helpers.book.profiles import load_profile
from helpers.heads.ablation import one_head_configs, single_layer_sweep
from helpers.heads.devices import to_device
from helpers.heads.forked import ENV as PROCESSES_ENV
from helpers.heads.forked import sweep_processes
from helpers.heads.sites import device_of
from helpers.zoo.classifier_training import batches, by_length, encode, in_order
from helpers.zoo.first_token_only import first_token_only


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


@contextlib.contextmanager
def processes(n: int):
    """Sweeps inside use ``n`` processes (``$SIXTEEN_HEADS_SWEEP_PROCESSES``)."""
    old = os.environ.get(PROCESSES_ENV)
    os.environ[PROCESSES_ENV] = str(n)
    try:
        yield
    finally:
        if old is None:
            del os.environ[PROCESSES_ENV]
        else:
            os.environ[PROCESSES_ENV] = old


def timed_paths(before, now, split: int):
    """Times of ``before`` and ``now`` in this process, and of ``now`` over ``split`` processes."""
    with processes(1):
        t_before, out_before = timed(before)
        t_now, out_now = timed(now)
    if split < 2:  # on a GPU the sweep stays in one process
        return (t_before, t_now, t_now), (out_before, out_now, out_now)
    with processes(split):
        t_split, out_split = timed(now)
    return (t_before, t_now, t_split), (out_before, out_now, out_split)


def split_for(model) -> int:
    """Processes of the split path: 1 on a GPU, else at least 2 (``sweep_processes``)."""
    return 1 if device_of(model).type != "cpu" else max(2, sweep_processes(model))


def report(times, split: int, per_pass_line: str, same: bool, what: str) -> None:
    before, now, forked = times
    labels = ["before, one process:", per_pass_line + ", one process:", f"the same over {split} processes:"]
    width = max(map(len, labels))
    print(f"  {labels[0]:{width}s} {before:.1f} s")
    print(f"  {labels[1]:{width}s} {now:.1f} s (ratio {now / before:.3f})")
    print(f"  {labels[2]:{width}s} {forked:.1f} s (ratio {forked / before:.3f}, target <= 0.4)")
    print(f"  same {what} on every path: {same}")


def translation(profile: dict, examples: int, per_pass: int) -> None:
    model = course.load_translation(profile, "translation")
    pairs = course.load_data(profile, "translation")["test13"]
    sources = [p.src for p in (pairs[:examples] if examples else pairs)]
    configs = one_head_configs(model)
    settings = dict(beam=1, max_len_b=24, batch_size=64, progress=False)
    split = split_for(model)
    times, outs = timed_paths(lambda: translation_sweep(model, sources, configs, configs_per_pass=1, **settings),
                              lambda: translation_sweep(model, sources, configs, configs_per_pass=per_pass, **settings),
                              split)
    (base_1, one), *others = outs
    same = all(base == base_1 and all(one[c] == got[c] for c in configs) for base, got in others)
    print(f"translation ({len(configs)} one-head configurations + unmasked, {len(sources)} verses of test13, greedy):")
    report(times, split, f"{per_pass} per search", same, "hypotheses")


def classifier(profile: dict, examples: int, per_pass: int) -> None:
    model, tokenizer = course.load_classifier(profile, "nli")
    data = course.load_data(profile, "nli")["matched"]
    data = data[:examples] if examples else data
    encoded = encode(tokenizer, data, profile["models"]["nli"]["fine_tune"]["max_length"])
    configs = one_head_configs(model)

    def run(m, batch):
        return m(**to_device(batch, m)).logits.argmax(-1)

    order = by_length(encoded)

    def now():
        with first_token_only(model):
            return single_layer_sweep(model, list(batches(encoded, 64, order)), run, configs, progress=False,
                                      configs_per_pass=per_pass)

    split = split_for(model)
    times, outs = timed_paths(lambda: single_layer_sweep(model, list(batches(encoded, 64)), run, configs,
                                                         progress=False), now, split)
    (base_1, one), *others = outs
    same = all(torch.equal(base_1, in_order(base, order)) and all(torch.equal(one[c], in_order(got[c], order))
                                                                  for c in configs) for base, got in others)
    print(f"classifier ({len(configs)} one-head configurations + unmasked, {len(data)} examples of matched):")
    report(times, split, f"by length, {per_pass} per pass, [CLS] last", same, "predictions")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="course")
    parser.add_argument("--examples", type=int, default=0, help="0: the whole split")
    parser.add_argument("--only", choices=["translation", "classifier"], help="time one of the two sweeps")
    args = parser.parse_args()
    profile = load_profile(args.profile)
    missing = [name for name in ("translation", "nli") if not course.model_dir(profile, name).exists()]
    if missing:
        raise SystemExit(f"bench_sweeps needs the {args.profile} models {missing} (not in {course.model_dir(profile, missing[0]).parent}): "
                         f"run `make models PROFILE={args.profile}` first")
    print(f"{torch.get_num_threads()} threads; first training seed's models")
    if args.only != "classifier":
        translation(profile, args.examples, TRANSLATION_CONFIGS_PER_PASS)
    if args.only != "translation":
        classifier(profile, args.examples, CLASSIFIER_CONFIGS_PER_PASS)


if __name__ == "__main__":
    main()
