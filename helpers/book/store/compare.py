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

The command line that prints these outcomes, and judges every claim on both folders, is
``python -m helpers.book.scorecard.compare_builds`` (it needs the scorecard, which this folder
may not import).
"""

from __future__ import annotations

import re
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
FLOAT32_RTOL = 1e-5  # a few float32 ulps: what reordering a float32 sum can move


@dataclass(frozen=True)
class TableComparison:
    """One table's outcome. ``columns``: the columns that differ; ``largest``: the largest
    absolute difference among numbers that differ (0 where none)."""

    name: str
    outcome: str
    columns: tuple[str, ...] = ()
    largest: float = 0.0
    detail: str = ""


def compare_folders(before: Path, after: Path, rtol: float = FLOAT32_RTOL) -> list[TableComparison]:
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
            out.append(TableComparison(name, "missing"))
        elif name not in first:
            out.append(TableComparison(name, "added"))
        else:
            out.append(compare_tables(name, pd.read_csv(first[name]), pd.read_csv(second[name]), rtol))
    return out


def compare_tables(name: str, a: pd.DataFrame, b: pd.DataFrame, rtol: float = FLOAT32_RTOL) -> TableComparison:
    """The outcome for one table read twice (see the module's docstring)."""
    stem = Path(name).stem
    if _TIMING_TABLES.search(stem):
        return TableComparison(name, "timing")
    if list(a.columns) != list(b.columns):
        gone, new = sorted(set(a.columns) - set(b.columns)), sorted(set(b.columns) - set(a.columns))
        return TableComparison(name, "different", detail=f"columns differ: only before {gone}, only after {new}")
    if len(a) != len(b):
        return TableComparison(name, "different", detail=f"{len(a)} rows before, {len(b)} after")
    gaps = {column: _compare_column(a[column], b[column], rtol) for column in a.columns}
    changed = [c for c, (outcome, _) in gaps.items() if outcome == "different"]
    real = [c for c in changed if not _TIMING_COLUMNS.search(str(c))]
    rounded = [c for c, (outcome, _) in gaps.items() if outcome == "rounding"]
    for outcome, columns in (("different", real), ("rounding", rounded)):
        if columns:
            return TableComparison(name, outcome, tuple(columns), max(gaps[c][1] for c in columns))
    if changed:
        return TableComparison(name, "timing", tuple(changed))
    return TableComparison(name, "equal")


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
