"""Did a change leave the book alone? Two builds' results folders, compared table by table and
verdict by verdict.

Run it as ``python -m helpers.book.scorecard.compare_builds BEFORE AFTER``. It prints one line per
table that is not ``equal`` (the outcomes of ``store.compare``) and exits 1 when any is
``different``, ``missing`` or ``added``. With ``--verdicts`` it also judges every claim of the
scorecard on both folders, on both measures (``compare_verdicts``), prints each claim whose
verdict differs, and exits 1 when one does.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from ..store.compare import FLOAT32_RTOL, compare_folders
from ..verdicts.engine import MEASURES, judge


def compare_verdicts(before: Path, after: Path) -> pd.DataFrame:
    """Every scorecard claim judged on ``before`` and on ``after`` by this code's rules (the one
    answer per claim and measure, ``engine.judge``): one row per claim and measure with key,
    measure, ``before``, ``after`` (the verdicts), ``same`` (bool) and ``before ours`` / ``after ours``
    (the claims' texts, which may differ where a number moved within the rule)."""
    from .card import CLAIMS  # every chapter's module: imported only when verdicts are asked for

    rows = []
    for claim in CLAIMS:
        for measure in MEASURES:
            first, second = judge(claim, before, measure)[-1], judge(claim, after, measure)[-1]
            rows.append(
                {
                    "key": claim.key,
                    "measure": MEASURES[measure],
                    "before": first["verdict"],
                    "after": second["verdict"],
                    "same": first["verdict"] == second["verdict"],
                    "before ours": first["ours"],
                    "after ours": second["ours"],
                }
            )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rtol", type=float, default=FLOAT32_RTOL, help="relative tolerance of 'rounding'")
    parser.add_argument("--verdicts", action="store_true", help="also judge every claim on both folders")
    args = parser.parse_args(argv)
    results = compare_folders(args.before, args.after, args.rtol)
    counts = Counter(r.outcome for r in results)
    for r in results:
        if r.outcome != "equal":
            cols = f" columns {list(r.columns)}" if r.columns else ""
            gap = f" largest |difference| {r.largest:.3g}" if r.largest else ""
            print(f"{r.outcome:9s} {r.name}{cols}{gap} {r.detail}".rstrip())
    print(", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    failed = bool({"different", "missing", "added"} & counts.keys())
    if args.verdicts:
        verdicts = compare_verdicts(args.before, args.after)
        for row in verdicts[~verdicts["same"]].itertuples():
            print(f"verdict   {row.key} ({row.measure}): {row.before} -> {row.after}")
        print(f"verdicts: {int(verdicts['same'].sum())} of {len(verdicts)} the same")
        failed = failed or not verdicts["same"].all()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
