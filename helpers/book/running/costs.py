"""What a build costs, read from what it recorded: each chapter's seconds
(``results/<profile>/run_times.csv``, written by the runner), each model's training time and the
machine (``results/<profile>/models.json``, written by ``make models``), and the bytes the
caches hold on disk. The "What it costs" chapter shows these tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..store.results import read_run_times

MB = 1024 * 1024


def chapter_times(profile: str, chapters: Sequence[str]) -> pd.DataFrame:
    """One row per chapter of ``chapters`` (book order): ``seconds`` and ``finished`` (UTC) of its
    last complete run, NaN for a chapter not run yet on this profile."""
    return pd.DataFrame({"notebook": list(chapters)}).merge(read_run_times(profile), on="notebook", how="left")


def shown_times(times: pd.DataFrame, after: Sequence[str]) -> pd.DataFrame:
    """``chapter_times`` as the page shows it: notebook, minutes (one decimal) and finished; a
    chapter with no recorded run says "not run yet", or "runs after this page" when it is one of
    ``after`` (the chapters the build runs after the costs page, e.g. the book's last)."""
    shown = times.assign(minutes=(times["seconds"] / 60).round(1))[["notebook", "minutes", "finished"]]
    shown = shown.astype(object)
    missing = shown["minutes"].isna()
    later = shown["notebook"].isin(list(after))
    for column in ("minutes", "finished"):
        shown.loc[missing & later, column] = "runs after this page"
        shown.loc[missing & ~later, column] = "not run yet"
    return shown


def model_times(summary: dict) -> pd.DataFrame:
    """One row per trained model run of a ``models.json`` summary: task, training minutes, the
    machine that trained it, when, and whether the last build reused it from the cache."""
    rows = [
        {
            "model": name,
            "task": m.get("task"),
            "train_minutes": m["train_seconds"] / 60,
            "trained_on": m.get("machine"),
            "built": m.get("built"),
            "reused_from_cache": m.get("reused_from_cache"),
        }
        for name, m in summary.get("models", {}).items()
        if m.get("train_seconds") is not None
    ]
    return pd.DataFrame(rows, columns=["model", "task", "train_minutes", "trained_on", "built", "reused_from_cache"])


def _folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (0 if it does not exist); links are not followed."""
    folder = Path(folder)
    if not folder.exists():
        return 0
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def cache_sizes(summary: dict, converted_root: Path) -> pd.DataFrame:
    """Disk use of the cache a build leaves, in MB: per model run of ``summary`` its files
    (weights, data, checkpoints) and its sweeps (model outputs under head masks), then each
    shipped model converted under ``converted_root`` (e.g. SmolLM2)."""
    rows = []
    for name, m in summary.get("models", {}).items():
        folder = Path(m["path"])
        sweeps = _folder_bytes(folder / "sweeps")
        rows.append({"what": name, "model_mb": (_folder_bytes(folder) - sweeps) / MB, "sweeps_mb": sweeps / MB})
    root = Path(converted_root)
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []:
        rows.append({"what": f"converted: {folder.name}", "model_mb": _folder_bytes(folder) / MB, "sweeps_mb": 0.0})
    return pd.DataFrame(rows, columns=["what", "model_mb", "sweeps_mb"])


def machine_table(summary: dict) -> pd.DataFrame:
    """The machine of a ``models.json`` summary, one row per property."""
    machine = summary.get("machine", {})
    return pd.DataFrame({"value": [str(v) for v in machine.values()]}, index=pd.Index(list(machine), name="machine"))


def summary_text(profile: str, summary: dict, *, models: pd.DataFrame, times: pd.DataFrame, disk: pd.DataFrame) -> str:
    """The page's paragraph, every number from the tables above it (Markdown)."""
    from ..store.progress import duration

    if not summary and times["seconds"].isna().all():
        return f"No build of the `{profile}` profile has been recorded here yet: run `make book PROFILE={profile}`."
    parts = []
    machine = summary.get("machine", {})
    if machine:
        parts.append(
            f"On {machine.get('cpu_model', 'this machine')} with {machine.get('cpus', '?')} CPUs "
            f"(torch {machine.get('torch', '?')}), the"
        )
    else:
        parts.append("The")
    if len(models):
        reused = int(models["reused_from_cache"].fillna(False).astype(bool).sum())
        parts.append(f" {len(models)} model runs trained for {duration(models['train_minutes'].sum() * 60)} in all")
        if summary.get("seconds_this_run") is not None:
            parts.append(
                f"; the last `make models` took {duration(summary['seconds_this_run'])} of wall time"
                + (f" and reused {reused} of them from the cache" if reused else ", training every one")
            )
        parts.append(". ")
    else:
        parts.append(" models have no recorded training time. ")
    ran = times.dropna(subset=["seconds"])
    if len(ran):
        longest = ran.loc[ran["seconds"].idxmax()]
        parts.append(
            f"The {len(ran)} chapters with a recorded run took {duration(ran['seconds'].sum())}, the longest "
            f"`{longest['notebook']}` ({duration(longest['seconds'])}). "
        )
    missing = times.loc[times["seconds"].isna(), "notebook"].tolist()
    if missing:
        parts.append(f"Not run yet on this profile: {', '.join(f'`{m}`' for m in missing)}. ")
    if len(disk):
        total, sweeps = disk["model_mb"].sum() + disk["sweeps_mb"].sum(), disk["sweeps_mb"].sum()
        parts.append(f"The caches hold {total / 1024:.2f} GB for this profile, {sweeps / 1024:.2f} GB of it sweeps.")
    return "".join(parts).strip()


# ---- where the time goes: the chapters' ledgers --------------------------------------------------
def sweep_cost_tables(profile: str, times: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """From the chapters' ledgers (``sweep_costs.csv``): ``shares`` (seconds and share of the chapters'
    recorded time by category; ``other`` is the rest: loading, bootstraps, tables, figures),
    ``chapters`` (per chapter its recorded seconds and those its timed blocks account for) and
    ``top`` (the ten most expensive blocks)."""
    from ..store.sweep_costs import category_shares, chapter_totals, most_expensive, read_sweep_costs

    ledger = read_sweep_costs(profile)
    ran = times.dropna(subset=["seconds"])
    totals = chapter_totals(ledger).rename(columns={"seconds": "in timed blocks"})
    chapters = (
        ran[["notebook", "seconds"]]
        .merge(totals, on="notebook", how="left")
        .fillna({"blocks": 0, "in timed blocks": 0.0, "read from the cache": 0})
    )
    top = most_expensive(ledger)[
        [
            "notebook",
            "category",
            "what",
            "model",
            "seed",
            "examples",
            "configs",
            "computed",
            "seconds",
            "seconds_per_config_example",
        ]
    ]
    return {
        "shares": category_shares(ledger, float(ran["seconds"].sum()) if len(ran) else None),
        "chapters": chapters,
        "top": top,
    }


_DENORMAL_SHARE = 0.0047  # of the weights: what the course translation model held after 9 epochs without flush-to-zero


def denormal_costs(
    settings, model_name: str = "translation", *, sentences: int = 200, decoded: int = 64, repeats: int = 3
) -> pd.DataFrame:
    """What flush-to-zero saves, measured now on this machine (one thread, median of ``repeats``):
    the 512 x 512 matmul with and without denormal operands, and on ``model_name``'s first run a
    teacher-forced pass over ``sentences`` test13 pairs and greedy decoding of ``decoded`` of them,
    as saved (no denormal weights) and with ``_DENORMAL_SHARE`` of its weights made denormal (as a
    model trained without the mode holds them), each with the mode off and on."""
    import copy

    from ...base.denormals import count_denormals, matmul_penalty, plant_denormals_, timed
    from ...zoo.scorers import translation_nll
    from ...zoo.sweep_decoder import greedy_copies
    from .. import course

    rows = [
        {"what": f"512 x 512 matmul, {k}", "seconds": off, "flush-to-zero seconds": on}
        for k, (off, on) in matmul_penalty(repeats=repeats).items()
    ]
    model = course.load_translation(settings, model_name)
    pairs = course.load_data(settings, model_name)["test13"][:sentences]
    planted = copy.deepcopy(model)
    share = plant_denormals_(planted, _DENORMAL_SHARE) / sum(p.numel() for p in planted.parameters())
    for label, m in (
        (f"{model_name} as saved ({count_denormals(model)} denormal weights)", model),
        (f"{model_name} with {share:.2%} of its weights denormal", planted),
    ):
        for task, run in (
            (f"teacher-forced pass, {len(pairs)} sentences", lambda m=m: translation_nll(m, pairs)),
            (
                f"greedy decoding, {decoded} sentences",
                lambda m=m: greedy_copies(m, [p.src for p in pairs[:decoded]], copies=1, max_len_a=1.0, max_len_b=24),
            ),
        ):
            off, on = (timed(run, flush, repeats) for flush in (False, True))
            rows.append({"what": f"{label}: {task}", "seconds": off, "flush-to-zero seconds": on})
    table = pd.DataFrame(rows)
    return table.assign(ratio=table["seconds"] / table["flush-to-zero seconds"])
