"""A profile's models and data, loaded by name for the chapters (built first where needed), and
the chapters' helpers over training runs (``over_seeds``, ``first_seed``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ...base import ledger
from ...base.devices import default_device
from ...zoo import model_cache
from ...zoo.locations import sweeps_scope
from ...zoo.model_cache import subset  # noqa: F401 (chapters draw their examples with course.subset)
from ..profiles.profile import Profile
from .building import build_one, ensure_built
from .specs import model_dir, model_specs, resolve, seed_runs

if TYPE_CHECKING:
    import pandas as pd


def over_seeds(
    settings: Profile, name: str, measure: Callable[[int, str], pd.DataFrame], limit: int = 0
) -> pd.DataFrame:
    """``measure(seed, run)`` (a table) for each training run of model ``name`` (the first
    ``limit``; 0: all), stacked, with the run's seed in a ``training_seed`` column."""
    import pandas as pd

    return pd.concat(
        [measure(seed, run).assign(training_seed=seed) for seed, run in seed_runs(settings, name, limit)],
        ignore_index=True,
    )


def first_seed(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` (stacked by ``over_seeds``) of its first training seed: the run the
    chapters draw their figures from."""
    return table[table["training_seed"] == table["training_seed"].iloc[0]]


def load_data(settings: Profile, name: str) -> dict[str, list]:
    """The splits of model ``name`` (built first if needed): ``{split: [Example or Pair]}``."""
    return model_cache.read_data(ensure_built(settings, name), model_specs(settings)[resolve(settings, name)]["task"])


# ---- building --------------------------------------------------------------------------------


def records(settings: Profile) -> dict[str, dict]:
    """``{name: record}`` of every model of ``settings`` (built first if needed), as in
    models.json but without rewriting it."""
    return {name: build_one(settings, name, progress=False) for name in model_specs(settings)}


def load_classifier(settings: Profile, name: str):
    """``(model, tokenizer)`` of a fine-tuned classifier, built first if needed; eval mode, on
    ``default_device()``."""
    model, tokenizer = model_cache.load_built(ensure_built(settings, name))
    return ledger.name_model(model.to(default_device()), resolve(settings, name)), tokenizer


def load_translation(settings: Profile, name: str = "translation", epoch: int | None = None):
    """The trained fairseq model (the final one, or the checkpoint after ``epoch``); eval mode,
    on ``default_device()``."""
    model = model_cache.load_built(ensure_built(settings, name), epoch)[0].to(default_device())
    return ledger.name_model(model, resolve(settings, name) + ("" if epoch is None else f" epoch {epoch}"))


def sweeps_dir(settings: Profile, name: str) -> Path:
    """Where the chapters cache model ``name``'s outputs under head masks (see sweep_cache)."""
    return sweeps_scope(model_dir(settings, name) / "sweeps")


def subset_positions(total: int, n: int, seed: int = 0) -> list[int]:
    """The positions ``subset`` draws from ``total`` examples, sorted (``subset`` of the positions
    themselves: the same draw)."""
    return subset(range(total), n, seed)
