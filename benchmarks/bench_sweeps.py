"""Sweep time of the course models' one-head ablations: the path before configuration batches against today's.

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
split over ``sweep_processes`` forked processes (``helpers/sweeps/forked.py``; on a CPU of 2 or
more cores, 2 processes of half the threads each), which is how the chapters run it. All on the
first training seed's model; the script checks that every path gives the same hypotheses and
predictions. It needs the course models (``make models``); it prints ratios, it asserts nothing
about time.

Run: .venv/bin/python benchmarks/bench_sweeps.py [--profile course] [--examples N] [--rounds R]
    [--only translation|classifier]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from helpers.base.denormals import flush_denormals
from helpers.base.devices import device_of, to_device
from helpers.book import course
from helpers.book.experiments.head_effects import (
    CLASSIFIER_CONFIGS_PER_PASS,
    TRANSLATION_CONFIGS_PER_PASS,
    translation_sweep,
)
from helpers.book.profiles import load_profile
from helpers.sweeps.ablation import one_head_configs, single_layer_sweep
from helpers.sweeps.forked import ENV as PROCESSES_ENV
from helpers.sweeps.forked import sweep_processes
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


def timed_paths(make_before, make_now, split: int, rounds: int, warmup_items: int = 8):
    """Median times over ``rounds`` of ``before`` and ``now`` in this process, and of ``now`` over
    ``split`` processes, and each path's output (of its last round). ``make_*(n)`` gives a path on
    the first ``n`` items (0: all). Each round runs the paths in a rotated order, so that a slow
    spell of the machine does not fall on one path; each path first runs once untimed on
    ``warmup_items`` items."""
    paths = [(make_before, 1), (make_now, 1)] + ([(make_now, split)] if split >= 2 else [])
    for make, n in paths:
        with processes(n):
            make(warmup_items)()
    times: list[list[float]] = [[] for _ in paths]
    outs: list = [None] * len(paths)
    for r in range(rounds):
        for i in [*range(r % len(paths), len(paths)), *range(r % len(paths))]:
            make, n = paths[i]
            with processes(n):
                seconds, outs[i] = timed(make(0))
            times[i].append(seconds)
    medians = [statistics.median(t) for t in times]
    if split < 2:  # on a GPU the sweep stays in one process
        medians, outs = medians + medians[1:], outs + outs[1:]
    return tuple(medians), tuple(outs)


def split_for(model) -> int:
    """Processes of the split path: 1 on a GPU, else at least 2 (``sweep_processes``)."""
    return 1 if device_of(model).type != "cpu" else max(2, sweep_processes(model))


def report(times, split: int, per_pass_line: str, same: bool, what: str, rounds: int) -> None:
    before, now, forked = times
    print(f"  medians of {rounds} round(s), after an untimed warm-up of each path")
    labels = ["before, one process:", per_pass_line + ", one process:", f"the same over {split} processes:"]
    width = max(map(len, labels))
    print(f"  {labels[0]:{width}s} {before:.1f} s")
    print(f"  {labels[1]:{width}s} {now:.1f} s (ratio {now / before:.3f})")
    print(f"  {labels[2]:{width}s} {forked:.1f} s (ratio {forked / before:.3f}, target <= 0.4)")
    print(f"  same {what} on every path: {same}")


def translation(profile: dict, examples: int, per_pass: int, rounds: int) -> None:
    model = course.load_translation(profile, "translation")
    pairs = course.load_data(profile, "translation")["test13"]
    sources = [p.src for p in (pairs[:examples] if examples else pairs)]
    configs = one_head_configs(model)
    settings = dict(beam=1, max_len_b=24, batch_size=64, progress=False)
    split = split_for(model)

    def path(per: int):
        return lambda n: (
            lambda: translation_sweep(model, sources[: n or None], configs, configs_per_pass=per, **settings)
        )

    times, outs = timed_paths(path(1), path(per_pass), split, rounds)
    (base_1, one), *others = outs
    same = all(base == base_1 and all(one[c] == got[c] for c in configs) for base, got in others)
    print(f"translation ({len(configs)} one-head configurations + unmasked, {len(sources)} verses of test13, greedy):")
    report(times, split, f"{per_pass} per search", same, "hypotheses", rounds)


def classifier(profile: dict, examples: int, per_pass: int, rounds: int) -> None:
    model, tokenizer = course.load_classifier(profile, "nli")
    data = course.load_data(profile, "nli")["matched"]
    data = data[:examples] if examples else data
    encoded = encode(tokenizer, data, profile.max_length("nli"))
    configs = one_head_configs(model)

    def run(m, batch):
        return m(**to_device(batch, m)).logits.argmax(-1)

    order = by_length(encoded)

    def before(n: int):
        return lambda: single_layer_sweep(model, list(batches(encoded, 64))[: n or None], run, configs, progress=False)

    def now(n: int):
        def sweep():
            with first_token_only(model):
                return single_layer_sweep(
                    model,
                    list(batches(encoded, 64, order))[: n or None],
                    run,
                    configs,
                    progress=False,
                    configs_per_pass=per_pass,
                )

        return sweep

    split = split_for(model)
    times, outs = timed_paths(before, now, split, rounds, warmup_items=1)  # classifier items: batches of 64
    (base_1, one), *others = outs
    same = all(
        torch.equal(base_1, in_order(base, order))
        and all(torch.equal(one[c], in_order(got[c], order)) for c in configs)
        for base, got in others
    )
    print(f"classifier ({len(configs)} one-head configurations + unmasked, {len(data)} examples of matched):")
    report(times, split, f"by length, {per_pass} per pass, [CLS] last", same, "predictions", rounds)


def main() -> None:
    flush_denormals()  # before torch starts its threads (helpers/base/denormals.py)
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="course")
    parser.add_argument("--examples", type=int, default=0, help="0: the whole split")
    parser.add_argument("--only", choices=["translation", "classifier"], help="time one of the two sweeps")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of every path; medians are printed")
    args = parser.parse_args()
    profile = load_profile(args.profile)
    missing = [name for name in ("translation", "nli") if not course.model_dir(profile, name).exists()]
    if missing:
        raise SystemExit(
            f"bench_sweeps needs the {args.profile} models {missing} (not in "
            f"{course.model_dir(profile, missing[0]).parent}): "
            f"run `make models PROFILE={args.profile}` first"
        )
    print(f"{torch.get_num_threads()} threads; first training seed's models")
    if args.only != "classifier":
        translation(profile, args.examples, TRANSLATION_CONFIGS_PER_PASS, args.rounds)
    if args.only != "translation":
        classifier(profile, args.examples, CLASSIFIER_CONFIGS_PER_PASS, args.rounds)


if __name__ == "__main__":
    main()
