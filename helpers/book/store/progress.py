"""The one-line progress reports of a long build: where it is, how long it has run, and what is
left, estimated from the times the last build recorded (``run_times.csv`` for chapters,
``models.json`` for models)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .results import read_models_summary, read_run_times


def duration(seconds: float) -> str:
    """``42 s``, ``3.5 min`` or ``1 h 05 min``."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest:02d} min"


def estimate_left(left: Sequence[str], recorded: Mapping[str, float], parallel: int = 1) -> str:
    """What is left of a build whose unfinished steps are ``left``, from ``recorded`` seconds per
    step (the last build's); ``parallel`` steps run side by side. Says which part it covers
    when some steps have no recorded time."""
    if not left:
        return "nothing left"
    known = [recorded[name] for name in left if name in recorded]
    if not known:
        return "no estimate of what is left yet (no recorded times: this is the first run)"
    guess = f"about {duration(sum(known) / max(parallel, 1))} left"
    if len(known) < len(left):
        guess += f" for the {len(known)} of {len(left)} with a recorded time"
    return guess + " (last recorded times)"


def progress_line(index: int, total: int, *, name: str, elapsed: float, estimate: str) -> str:
    """``[6/14] 06_pruning_curves: 12.3 min so far, about 20.5 min left (last recorded times)``"""
    return f"[{index}/{total}] {name}: {duration(elapsed)} so far, {estimate}"


def recorded_chapter_seconds(profile: str) -> dict[str, float]:
    """``{notebook: seconds}`` of the last complete run of each chapter (empty before the first,
    or when the file cannot be read: the estimate is a courtesy, never a reason to stop)."""
    try:
        times = read_run_times(profile)
        return {str(n): float(s) for n, s in zip(times["notebook"], times["seconds"])}
    except (OSError, ValueError, KeyError):
        return {}


def recorded_model_seconds(profile: str) -> dict[str, float]:
    """``{model run: training seconds}`` of the models the last ``make models`` built (models
    it reused from the cache keep the time of the build that trained them)."""
    try:
        models = read_models_summary(profile).get("models", {})
    except (OSError, ValueError):
        return {}
    return {name: float(m["train_seconds"]) for name, m in models.items() if m.get("train_seconds") is not None}
