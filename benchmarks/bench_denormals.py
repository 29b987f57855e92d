"""What flush-to-zero saves: denormal arithmetic against the same work with the mode on.

Prints, measured in this run on this machine (one thread, median of ``--repeats`` after a
warm-up): a 512 x 512 float32 matmul with ordinary and with denormal operands, and the course
translation model (first training seed) as saved and with 0.47% of its weights made denormal (the
share a checkpoint trained without the mode held): a teacher-forced pass over 200 test13 verses and
greedy decoding of 64, each with flush-to-zero off and on. Then how many denormal weights every
saved model of the profile holds (0: ``save_pruned`` flushes them). The "What it costs" chapter
shows the same table (``helpers.book.running.costs.denormal_costs``). It needs the profile's
models (``make models``) and asserts nothing about time.

Run: .venv/bin/python benchmarks/bench_denormals.py [--profile course] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os

# offline before transformers is first imported, which the helpers imports below do (E402)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from helpers.base.denormals import (  # noqa: E402
    count_denormals,
    flush_denormals,  # noqa: E402
    flushes_in_every_thread,
)
from helpers.book import course  # noqa: E402
from helpers.book.profiles import load_profile  # noqa: E402
from helpers.book.running.costs import denormal_costs  # noqa: E402
from helpers.zoo import model_cache  # noqa: E402


def main() -> None:
    flush_denormals()  # before torch starts its threads (helpers/base/denormals.py)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="course")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    settings = load_profile(args.profile)
    print(f"flush-to-zero in every torch thread of this process: {flushes_in_every_thread()}")
    table = denormal_costs(settings, repeats=args.repeats)
    for row in table.to_dict("records"):
        print(
            f"{row['what']}: {row['seconds']:.4f} s with the mode off, {row['flush-to-zero seconds']:.4f} s with "
            f"flush-to-zero -> {row['ratio']:.1f}x"
        )
    matmul = table.set_index("what")["seconds"]
    print(
        f"penalty of denormal operands on the matmul (mode off): "
        f"{matmul['512 x 512 matmul, denormal operands'] / matmul['512 x 512 matmul, normal operands']:.0f}x"
    )
    for name in course.model_specs(settings):
        model = model_cache.load_built(course.ensure_built(settings, name))[0]
        print(f"{name}: {count_denormals(model)} denormal values in its saved weights")


if __name__ == "__main__":
    main()
