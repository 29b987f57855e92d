"""Compare two results folders table by table: did a change leave the book's numbers alone?

A refactor that should change no number is checked by building the book before and after it and
comparing ``results/<profile>/`` of both builds. ``compare_folders`` reads every CSV of the first
folder and its namesake in the second, and sorts each into

* ``equal``: the same columns, rows and values (NaN equal to NaN);
* ``rounding``: the same except numbers within ``rtol`` of each other (a reordered float32 sum);
* ``timing``: a table of wall-clock times (by its name: every column of it, FLOPs included, is
  left uncompared), or a table differing only in timing columns;
* ``different``: anything else, with the columns that differ and the largest difference;
* ``missing`` / ``added``: in one folder only.

Run it as ``python -m helpers.book.store.compare BEFORE AFTER``; it prints one line per table
that is not ``equal`` and exits 1 when any is ``different``, ``missing`` or ``added``. With
``--verdicts`` it also judges every claim of the scorecard on both folders, on both measures
(``compare_verdicts``), prints each claim whose verdict differs, and exits 1 when one does.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

# Wall-clock readings: they differ between any two runs, so they are listed, never compared.
_TIMING_TABLES = re.compile(r"(^run_times$|_speed($|_)|_precision$|_timing|_costs?$|throughput)")
_TIMING_COLUMNS = re.compile(
    r"(seconds|\bms\b|_ms$|_s$|\(s\)|minutes|per s\b|per second|tok/s|tokens/s|tok_per|speed|time|finished|"
    r"throughput|elapsed|wall|x reference)",
    re.IGNORECASE,
)
_FLOAT32_RTOL = 1e-5  # a few float32 ulps: what reordering a float32 sum can move


@dataclass(frozen=True)
class _TableComparison:
    """One table's outcome. ``columns``: the columns that differ; ``largest``: the largest
    absolute difference among numbers that differ (0 where none)."""

    name: str
    outcome: str
    columns: tuple[str, ...] = ()
    largest: float = 0.0
    detail: str = ""


def compare_folders(before: Path, after: Path, rtol: float = _FLOAT32_RTOL) -> list[_TableComparison]:
    """Every CSV under ``before`` (recursively) against the one at the same relative path under
    ``after``, and the CSVs only ``after`` has; sorted by path."""
    for folder in (before, after):
        if not folder.is_dir() or not any(folder.rglob("*.csv")):
            raise SystemExit(f"{folder}: no such results folder, or it holds no CSV table")
    first = {p.relative_to(before).as_posix(): p for p in before.rglob("*.csv")}
    second = {p.relative_to(after).as_posix(): p for p in after.rglob("*.csv")}
    out = []
    for name in sorted(first.keys() | second.keys()):
        if name not in second:
            out.append(_TableComparison(name, "missing"))
        elif name not in first:
            out.append(_TableComparison(name, "added"))
        else:
            out.append(compare_tables(name, pd.read_csv(first[name]), pd.read_csv(second[name]), rtol))
    return out


def compare_tables(name: str, a: pd.DataFrame, b: pd.DataFrame, rtol: float = _FLOAT32_RTOL) -> _TableComparison:
    """The outcome for one table read twice (see the module's docstring)."""
    stem = Path(name).stem
    if _TIMING_TABLES.search(stem):
        return _TableComparison(name, "timing")
    if list(a.columns) != list(b.columns):
        gone, new = sorted(set(a.columns) - set(b.columns)), sorted(set(b.columns) - set(a.columns))
        return _TableComparison(name, "different", detail=f"columns differ: only before {gone}, only after {new}")
    if len(a) != len(b):
        return _TableComparison(name, "different", detail=f"{len(a)} rows before, {len(b)} after")
    gaps = {column: _compare_column(a[column], b[column], rtol) for column in a.columns}
    changed = [c for c, (outcome, _) in gaps.items() if outcome == "different"]
    real = [c for c in changed if not _TIMING_COLUMNS.search(str(c))]
    rounded = [c for c, (outcome, _) in gaps.items() if outcome == "rounding"]
    for outcome, columns in (("different", real), ("rounding", rounded)):
        if columns:
            return _TableComparison(name, outcome, tuple(columns), max(gaps[c][1] for c in columns))
    if changed:
        return _TableComparison(name, "timing", tuple(changed))
    return _TableComparison(name, "equal")


def _compare_column(a: pd.Series, b: pd.Series, rtol: float) -> tuple[str, float]:
    """("equal" | "rounding" | "different", the largest absolute gap among numbers)."""
    both_na = a.isna().to_numpy() & b.isna().to_numpy()
    if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
        x, y = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
        same = (x == y) | both_na
        if same.all():
            return "equal", 0.0
        finite = np.isfinite(x[~same]).all() and np.isfinite(y[~same]).all()
        gap = float(np.abs(x - y)[~same].max()) if finite else float("inf")
        close = np.isclose(x, y, rtol=rtol, atol=0.0) | both_na
        return ("rounding" if close.all() else "different"), gap
    same = (a.astype(str).to_numpy() == b.astype(str).to_numpy()) | both_na
    if same.all():
        return "equal", 0.0
    return "different", float("nan")


def compare_verdicts(before: Path, after: Path) -> pd.DataFrame:
    """Every scorecard claim judged on ``before`` and on ``after`` by this code's rules (the one
    answer per claim and measure, ``engine.judge``): one row per claim and measure with key,
    measure, ``before``, ``after`` (the verdicts), ``same`` (bool) and ``before ours`` / ``after ours``
    (the claims' texts, which may differ where a number moved within the rule)."""
    from ..scorecard.card import CLAIMS  # every chapter's module: imported only when verdicts are asked for
    from ..verdicts.engine import MEASURES, judge

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
    parser.add_argument("--rtol", type=float, default=_FLOAT32_RTOL, help="relative tolerance of 'rounding'")
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
