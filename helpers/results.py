"""Results are data first: tables written atomically under results/<profile>/."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def results_dir(profile: str) -> Path:
    path = ROOT / "results" / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_table(df: pd.DataFrame, profile: str, name: str) -> Path:
    """Write ``df`` to ``results/<profile>/<name>.csv`` atomically (a crash leaves the old file)."""
    path = results_dir(profile) / f"{name}.csv"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)
    return path
