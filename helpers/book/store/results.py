"""Results are data first: tables written atomically under results/<profile>/, and the one
reader of them (``read_table_file``; ``ChapterTables`` holds what a notebook saved)."""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator, Mapping
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
    _write(df, profile, name)
    return df


def _write(df: pd.DataFrame, profile: str, name: str) -> str:
    """``df`` written to ``results/<profile>/<name>.csv`` atomically; the CSV text written."""
    text = df.to_csv(index=False)
    with atomic_path(_table_path(profile, name)) as tmp:
        tmp.write_text(text)
    return text


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


class MissingTable(FileNotFoundError):
    """A result table that no chapter has saved yet."""


def read_table_file(path: Path, **options) -> pd.DataFrame:
    """The result table at ``path`` (``options`` go to ``pandas.read_csv``: ``nrows``,
    ``usecols``); ``MissingTable`` naming the file and the chapter to run when it is missing."""
    path = Path(path)
    if not path.is_file():
        number = path.stem.split("_", 1)[0]
        notebook = next((nb.stem for nb in sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))), number)
        raise MissingTable(
            f"{path} is missing: run the chapter that saves it first "
            f"(`python -m helpers.book.running.runner --profile {path.parent.name} --only {notebook}`)"
        )
    return pd.read_csv(path, **options)


def read_table(profile: str, name: str) -> pd.DataFrame:
    """``results/<profile>/<name>.csv``; ``MissingTable`` when no chapter has saved it yet."""
    return read_table_file(results_root() / profile / f"{name}.csv")


def saved_table(profile: str, name: str) -> pd.DataFrame | None:
    """``results/<profile>/<name>.csv`` as a table, or None when no chapter has saved it yet."""
    try:
        return read_table(profile, name)
    except MissingTable:
        return None


class ChapterTables(Mapping[str, pd.DataFrame]):
    """The tables a chapter's notebook saves on ``profile``, held: ``save`` writes each and keeps
    it, and ``tables[name]`` gives back a copy without reading the file again; a table this run
    has not saved is read once from ``results/<profile>/``."""

    def __init__(self, profile: str):
        self.profile = profile
        self._held: dict[str, pd.DataFrame] = {}

    def save(self, tables: Mapping[str, pd.DataFrame]) -> None:
        """Each of ``{name: table}`` saved as ``save_table`` does, and held as its file reads
        (parsed from the text written), so what is computed from it equals what the file gives."""
        for name, table in tables.items():
            self._held[name] = pd.read_csv(io.StringIO(_write(table, self.profile, name)))

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._held:
            self._held[name] = read_table(self.profile, name)
        return self._held[name].copy()

    def get(self, name: str, default: pd.DataFrame | None = None) -> pd.DataFrame | None:
        """``tables[name]``, or ``default`` when no chapter has saved it yet."""
        try:
            return self[name]
        except MissingTable:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)


def read_run_times(profile: str) -> pd.DataFrame:
    """``results/<profile>/run_times.csv``: one row per chapter's last complete run (notebook,
    seconds, finished: UTC time); no rows before the first run."""
    path = results_dir(profile) / "run_times.csv"
    return read_table_file(path) if path.exists() else pd.DataFrame(columns=["notebook", "seconds", "finished"])


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
