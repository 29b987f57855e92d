"""What each chapter's sweeps cost: the ledger entries (``helpers/base/ledger.py``) of its last
complete run, one row per timed block, in ``results/<profile>/sweep_costs.csv``.

While a chapter runs, its kernel appends every entry to ``results/<profile>/sweep_costs/<chapter>.jsonl``
(the runner points ``$SIXTEEN_HEADS_LEDGER`` there); when the chapter finishes, its rows replace
the chapter's earlier ones in the CSV. A row: the chapter, the category (decoding,
teacher-forced scoring, classifier scoring, importance, gate training, timing runs, or
``container`` for a block that only groups others, such as a pruning curve's steps), what was
computed, the model and its training seed, the examples and head configurations it covered, how
many configurations it computed (0: all read from the sweep cache), its seconds, its own seconds
(outside the blocks nested in it) and the seconds per computed configuration and example.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ...base.atomic import atomic_path
from ...base.ledger import CATEGORIES, CONTAINER
from .results import results_dir

_FILE = "sweep_costs.csv"
_COLUMNS = [
    "notebook",
    "category",
    "what",
    "model",
    "seed",
    "examples",
    "configs",
    "computed",
    "seconds",
    "own_seconds",
    "depth",
    "seconds_per_config_example",
]
_RUN = re.compile(r"^(?P<name>[^@]+)@(?P<seed>\d+)(?P<rest>.*)$")  # "translation@1 epoch 4"


def running_ledger(profile: str, notebook: str) -> Path:
    """The empty file the kernel of ``notebook`` appends its ledger entries to."""
    path = results_dir(profile) / "sweep_costs" / f"{notebook}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    return path


def _entries_table(path: Path, notebook: str) -> pd.DataFrame:
    """The ledger entries in ``path`` as rows (``_COLUMNS``); a model run's name ``nli@1`` is split
    into the model (``nli``) and its training seed (1)."""
    lines = path.read_text().splitlines() if path.exists() else []
    rows = []
    for line in lines:
        e = json.loads(line)
        m = _RUN.match(e["model"])
        model, seed = (m["name"] + m["rest"], int(m["seed"])) if m else (e["model"], None)
        work = e["computed"] * max(e["examples"], 1)
        rows.append(
            {
                "notebook": notebook,
                "category": e["category"],
                "what": e["what"],
                "model": model,
                "seed": seed,
                "examples": e["examples"],
                "configs": e["configs"],
                "computed": e["computed"],
                "seconds": e["seconds"],
                "own_seconds": e["own_seconds"],
                "depth": e["depth"],
                "seconds_per_config_example": e["seconds"] / work if work else None,
            }
        )
    return pd.DataFrame(rows, columns=_COLUMNS).astype({"seed": "Int64"})


def record_sweep_costs(profile: str, notebook: str, ledger: Path) -> Path:
    """Replace ``notebook``'s rows of ``sweep_costs.csv`` by the entries in ``ledger`` (its last
    complete run), then delete ``ledger``."""
    table = read_sweep_costs(profile)
    new = _entries_table(ledger, notebook)
    table = (
        pd.concat([t for t in (table[table["notebook"] != notebook], new) if len(t)], ignore_index=True)
        if len(table) or len(new)
        else table
    )
    path = results_dir(profile) / _FILE
    with atomic_path(path) as tmp:
        table.sort_values("notebook", kind="stable").to_csv(tmp, index=False)
    ledger.unlink(missing_ok=True)
    return path


def read_sweep_costs(profile: str) -> pd.DataFrame:
    """``sweep_costs.csv`` of ``profile`` (no rows before the first chapter ran)."""
    path = results_dir(profile) / _FILE
    return pd.read_csv(path) if path.exists() else pd.DataFrame(columns=_COLUMNS)


def category_shares(costs: pd.DataFrame, total_seconds: float | None = None) -> pd.DataFrame:
    """Seconds and share of the chapters' time by category (each block's own seconds, so nested
    blocks count once); ``other`` is time outside every category's blocks (``total_seconds``, the
    chapters' recorded time, minus the categories), when given. Rows in ``CATEGORIES``' order."""
    own = (
        costs.assign(category=costs["category"].replace({CONTAINER: "other"})).groupby("category")["own_seconds"].sum()
    )
    rows = {c: float(own.get(c, 0.0)) for c in CATEGORIES}
    rows["other"] = (
        max(0.0, total_seconds - sum(rows.values())) if total_seconds is not None else float(own.get("other", 0.0))
    )
    out = pd.DataFrame({"category": list(rows), "seconds": list(rows.values())})
    whole = total_seconds if total_seconds else out["seconds"].sum()
    return out.assign(share=out["seconds"] / whole if whole else 0.0)


def chapter_totals(costs: pd.DataFrame) -> pd.DataFrame:
    """Per chapter: the seconds of its outermost blocks, and of those computed or read from the cache."""
    top = costs[costs["depth"] == 0]
    cached = top["computed"] == 0
    return (
        pd.DataFrame(
            {
                "blocks": top.groupby("notebook").size(),
                "seconds": top.groupby("notebook")["seconds"].sum(),
                "read from the cache": top[cached].groupby("notebook").size(),
            }
        )
        .fillna(0)
        .reset_index()
    )


def most_expensive(costs: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` outermost blocks with the most seconds, most first."""
    top = costs[costs["depth"] == 0]
    return top.sort_values("seconds", ascending=False).head(n).reset_index(drop=True)
