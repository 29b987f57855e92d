"""What keeping freed memory in the heap saves: the Makefile's ``GLIBC_TUNABLES`` against glibc's defaults.

glibc's malloc serves a block of 128 KiB or more (the threshold then grows with what is freed, up
to 32 MiB) from a fresh ``mmap`` and gives it back on ``free``. A forward pass allocates its
activations anew each time, so by default the kernel maps and zeroes the same pages again and
again: system time, which was 7.3 of the 171 CPU minutes of a course build (be25765). The Makefile sets a fixed
32 MiB threshold and a trim threshold high enough that freed memory stays in the process, which
every process it starts inherits (the chapters' kernels, the sweeps' forked processes, the models'
training processes). The arithmetic does not change: the benchmark checks that both settings give
the same numbers, bit for bit.

Prints, measured in this run on this machine, the median of ``--rounds`` timed rounds after a
warm-up of each workload, each setting in its own process, glibc's defaults first:
* the NLI classifier's one-head sweep (73 configurations, lower layers replayed, 2 processes of one
  thread, as chapter 03 runs it) on ``--examples`` examples of matched;
* SmolLM2's one-head sweep on the 30 select verses of chapter 11 for the query heads of layers 0,
  15 and 29 (27 configurations, 3 a pass, as chapter 11 runs it).
It needs the profile's models (``make models``), runs under ``make bench`` (which sets the
tunables) and asserts nothing about time.

Run: make bench, or
    GLIBC_TUNABLES=... .venv/bin/python benchmarks/bench_malloc.py [--profile course] [--examples 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TUNABLES = "GLIBC_TUNABLES"


def _digest(outputs) -> str:
    """A digest of a sweep's outputs (lists of numbers, or tensors), exact to the last bit."""
    h = hashlib.sha256()
    for out in outputs:
        h.update(repr(out.tolist() if hasattr(out, "tolist") else out).encode())
    return h.hexdigest()[:16]


def _classifier(profile_name: str, examples: int):
    from helpers.book import course
    from helpers.book.experiments.head_effects import classifier_outputs
    from helpers.book.profiles import load_profile
    from helpers.sweeps.ablation import one_head_configs
    from helpers.sweeps.config_batches import UNMASKED

    profile = load_profile(profile_name)
    model, tokenizer = course.load_classifier(profile, "nli")
    data = course.load_data(profile, "nli")["matched"][:examples]
    configs = one_head_configs(model)

    def sweep():  # chapter 03's sweep, with no cache to read from
        get = classifier_outputs(model, tokenizer, data, configs, profile.max_length("nli"), progress=False)
        return [get(c) for c in (UNMASKED, *configs)]

    return sweep


def _language_model(_profile_name: str, _examples: int):
    from helpers.book.chapters.ch11_nine_heads import lm_sweep
    from helpers.sweeps.ablation import one_head_configs
    from helpers.zoo.causal_lm import lm_batches, verse_texts
    from helpers.zoo.registry import load_causal_lm

    model, tokenizer = load_causal_lm("smollm2", seed=0)
    texts = verse_texts({"select": 30}, version="web", max_words=40, seed=0)["select"]
    data = lm_batches(tokenizer, texts, 16)
    configs = [c for c in one_head_configs(model) if c[1] in (0, 15, 29)]

    def sweep():  # chapter 11's sweep, with no cache to read from
        base, outs = lm_sweep(model, data, configs, 3, progress=False)
        return [base, *(outs[c] for c in configs)]

    return sweep


WORKLOADS = {"classifier": _classifier, "language model": _language_model}


def child(workload: str, profile: str, examples: int, rounds: int) -> None:
    sweep = WORKLOADS[workload](profile, examples)
    out = sweep()  # warm-up
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        sweep()
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"seconds": seconds, "digest": _digest(out)}))


def measure(workload: str, tunables: str | None, args) -> dict:
    env = {k: v for k, v in os.environ.items() if k != TUNABLES}
    if tunables:
        env[TUNABLES] = tunables
    cmd = [
        sys.executable,
        __file__,
        "--child",
        workload,
        "--profile",
        args.profile,
        "--examples",
        str(args.examples),
        "--rounds",
        str(args.rounds),
    ]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if run.returncode:
        raise SystemExit(f"{workload} failed ({'tuned' if tunables else 'default'} malloc):\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="course")
    parser.add_argument("--examples", type=int, default=256, help="classifier examples swept")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per process, after a warm-up")
    parser.add_argument("--child", choices=sorted(WORKLOADS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from helpers.base.denormals import flush_denormals

        flush_denormals()  # before torch starts its threads, as in the book's kernels
        return child(args.child, args.profile, args.examples, args.rounds)
    tunables = os.environ.get(TUNABLES)
    if not tunables:
        raise SystemExit(f"${TUNABLES} is not set: run `make bench`, which sets the Makefile's value")
    print(f"tuned: {TUNABLES}={tunables}")
    for workload in WORKLOADS:
        default, tuned = measure(workload, None, args), measure(workload, tunables, args)
        a, b = statistics.median(default["seconds"]), statistics.median(tuned["seconds"])
        print(
            f"{workload}: default {a:.2f} s, tuned {b:.2f} s (ratio {b / a:.3f}; medians of {args.rounds} rounds); "
            f"same numbers: {default['digest'] == tuned['digest']}"
        )


if __name__ == "__main__":
    main()
