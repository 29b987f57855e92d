"""The sweep decoder against fairseq's SequenceGenerator: a translation sweep decoded both ways.

The course translation model's one-head configurations (all 144 by default) plus the unmasked
model, on ``--examples`` verses of test13, greedy, stopping 24 tokens beyond the source (the
course chapters' settings), ``--per-pass`` configurations per search, split over the sweep
processes as the chapters run it. Each path runs once untimed on 8 verses, then ``--rounds``
timed rounds in rotated order; the medians and their ratio are printed, and whether both paths
gave the same hypotheses for every configuration. Asserts nothing about time.

Run: .venv/bin/python benchmarks/bench_decoder.py [--profile course] [--examples 200] [--per-pass 1 4 12] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

# offline before transformers is first imported, which the helpers imports below do (E402)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from helpers.base.denormals import flush_denormals  # noqa: E402
from helpers.book import course  # noqa: E402
from helpers.book.profiles import load_profile  # noqa: E402
from helpers.sweeps.ablation import UNMASKED, gated_passes, one_head_configs  # noqa: E402
from helpers.sweeps.forked import sweep_processes  # noqa: E402
from helpers.zoo.sweep_decoder import greedy_copies  # noqa: E402
from helpers.zoo.translation_model import translate_copies  # noqa: E402


def sweep(model, sources, configs, per_pass: int, decoder: str) -> dict:
    def run(m, copies, gated):
        if decoder == "greedy":
            return greedy_copies(m, sources, copies, gated, batch_size=64, max_len_b=24)
        return translate_copies(m, sources, copies, gated, beam=1, batch_size=64, max_len_b=24)

    return dict(gated_passes(model, [UNMASKED, *configs], run, per_pass, progress=False))


def main() -> None:
    flush_denormals()  # before torch starts its threads (helpers/base/denormals.py)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="course")
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--configs", type=int, default=0, help="the first N one-head configurations (0: all)")
    parser.add_argument("--per-pass", type=int, nargs="+", default=[1, 4, 12])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    settings = load_profile(args.profile)
    model = course.load_translation(settings, "translation")
    sources = [p.src for p in course.subset(course.load_data(settings, "translation")["test13"], args.examples)]
    configs = one_head_configs(model)[: args.configs or None]
    print(
        f"{len(configs)} configurations + unmasked, {len(sources)} verses, greedy, "
        f"{sweep_processes(model)} sweep processes"
    )
    for per_pass in args.per_pass:
        paths = {
            name: (lambda n, name=name, per_pass=per_pass: sweep(model, sources[: n or None], configs, per_pass, name))
            for name in ("fairseq", "greedy")
        }
        for run in paths.values():
            run(8)
        times: dict[str, list[float]] = {name: [] for name in paths}
        outs: dict[str, dict] = {}
        for r in range(args.rounds):
            for name in list(paths) if r % 2 == 0 else list(paths)[::-1]:
                start = time.perf_counter()
                outs[name] = paths[name](0)
                times[name].append(time.perf_counter() - start)
        fairseq, greedy = (statistics.median(times[n]) for n in ("fairseq", "greedy"))
        same = outs["fairseq"] == outs["greedy"]
        print(
            f"  {per_pass:2d} per search: SequenceGenerator {fairseq:6.1f} s, sweep decoder {greedy:6.1f} s, "
            f"ratio {greedy / fairseq:.3f}; same hypotheses for every configuration: {same}"
        )


if __name__ == "__main__":
    main()
