"""Where the book's time goes, by kind of work, from the last build's own records.

Reads ``results/<profile>/run_times.csv`` (each chapter's seconds, written by the runner) and
``results/<profile>/sweep_costs.csv`` (each timed block of each chapter: sweeps, importance, gate
training, timing runs; ``helpers/base/ledger.py``) and prints the share of the chapters' time
in decoding, teacher-forced scoring, classifier scoring, importance, gate training, timing runs
and the rest; then each chapter's time and the ten most expensive blocks. Nothing is rerun: the
numbers are those of the build that wrote the records (``make book``), as the "What it costs"
chapter shows them.

Run: .venv/bin/python benchmarks/bench_book_costs.py [--profile course]
"""

from __future__ import annotations

import argparse

from helpers.book.profiles import load_profile
from helpers.book.running.costs import chapter_times, sweep_cost_tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="course")
    args = parser.parse_args()
    times = chapter_times(args.profile, list(load_profile(args.profile).notebooks))
    ran = times.dropna(subset=["seconds"])
    if ran.empty:
        raise SystemExit(
            f"no chapter of the {args.profile!r} profile has a recorded run: run `make book PROFILE={args.profile}`"
        )
    tables = sweep_cost_tables(args.profile, times)
    print(f"{args.profile}: {len(ran)} chapters, {ran['seconds'].sum() / 60:.1f} min in all")
    for row in tables["shares"].itertuples():
        print(f"  {row.category:24s} {row.seconds / 60:6.1f} min  {row.share:6.1%}")
    print("per chapter (min, of which in timed blocks):")
    for row in tables["chapters"].to_dict("records"):
        print(f"  {row['notebook']:32s} {row['seconds'] / 60:6.1f}  {row['in timed blocks'] / 60:6.1f}")
    print("the ten most expensive blocks:")
    for row in tables["top"].itertuples():
        seed = "" if row.seed != row.seed else f"@{row.seed:.0f}"
        print(
            f"  {row.seconds:7.1f} s  {row.notebook:28s} {row.category:22s} {row.model}{seed}: {row.what} "
            f"({row.computed} of {row.configs} configurations computed, {row.examples} examples)"
        )


if __name__ == "__main__":
    main()
