"""Results are data first: tables written atomically under results/<profile>/."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .atomic import atomic_path

ROOT = Path(__file__).resolve().parent.parent


def results_dir(profile: str) -> Path:
    path = ROOT / "results" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_table(df: pd.DataFrame, profile: str, name: str) -> Path:
    """Write ``df`` to ``results/<profile>/<name>.csv`` atomically (a crash leaves the old file)."""
    path = results_dir(profile) / f"{name}.csv"
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return path
