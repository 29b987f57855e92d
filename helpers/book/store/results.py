"""Results are data first: tables written atomically under results/<profile>/."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ...base.atomic import atomic_path
from ...zoo.locations import REPO as ROOT

ENV = "SIXTEEN_HEADS_RESULTS"  # another results folder than the repository's


def results_root() -> Path:
    """``$SIXTEEN_HEADS_RESULTS`` or ``<repo>/results``: one folder per profile below it."""
    return Path(os.environ.get(ENV, ROOT / "results"))


def results_dir(profile: str) -> Path:
    """``results_root()/<profile>``, created."""
    path = results_root() / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_table(df: pd.DataFrame, profile: str, name: str) -> pd.DataFrame:
    """Write ``df`` to ``results/<profile>/<name>.csv`` atomically (a crash leaves the old file);
    return ``df``, so a chapter saves a table where it computes it."""
    with atomic_path(_table_path(profile, name)) as tmp:
        df.to_csv(tmp, index=False)
    return df


def _table_path(profile: str, name: str) -> Path:
    """``results/<profile>/<name>.csv`` (the folder created)."""
    return results_dir(profile) / f"{name}.csv"


def save_tables(profile: str, tables: Mapping[str, pd.DataFrame]) -> list[Path]:
    """``save_table`` of each ``{name: table}``, in order; the files written."""
    for name, table in tables.items():
        save_table(table, profile, name)
    return [_table_path(profile, name) for name in tables]


def remove_tables(profile: str, names: Iterable[str]) -> list[Path]:
    """Delete ``results/<profile>/<name>.csv`` of each of ``names`` that exists (a table this run
    no longer makes, so that no rule reads a stale one); the files removed."""
    removed = [path for path in (_table_path(profile, name) for name in names) if path.exists()]
    for path in removed:
        path.unlink()
    return removed


def saved_table(profile: str, name: str) -> pd.DataFrame | None:
    """``results/<profile>/<name>.csv`` as a table, or None when no chapter has saved it yet."""
    path = results_root() / profile / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else None


def read_run_times(profile: str) -> pd.DataFrame:
    """``results/<profile>/run_times.csv``: one row per chapter's last complete run (notebook,
    seconds, finished: UTC time); no rows before the first run."""
    path = results_dir(profile) / "run_times.csv"
    return pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["notebook", "seconds", "finished"])


def read_models_summary(profile: str) -> dict:
    """``results/<profile>/models.json``, as ``make models`` wrote it (``{}`` before the first)."""
    import json

    path = results_dir(profile) / "models.json"
    return json.loads(path.read_text()) if path.exists() else {}


def record_run_time(profile: str, notebook: str, seconds: float) -> Path:
    """Keep ``results/<profile>/run_times.csv`` (notebook, seconds, finished: UTC time) up to date
    with the last complete run of ``notebook``; the progress lines and the costs page read it."""
    import datetime

    table = read_run_times(profile)
    row = pd.DataFrame(
        [
            {
                "notebook": notebook,
                "seconds": round(seconds, 1),
                "finished": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
            }
        ]
    )
    table = pd.concat([table[table["notebook"] != notebook], row], ignore_index=True).sort_values("notebook")
    with atomic_path(results_dir(profile) / "run_times.csv") as tmp:
        table.to_csv(tmp, index=False)
    return results_dir(profile) / "run_times.csv"
