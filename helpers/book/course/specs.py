"""A profile's models by name: the specs ``model_specs`` expands (one per training seed), their
names, seeds and cache folders. Nothing here builds or loads a model."""

from __future__ import annotations

import json
from pathlib import Path

from ...zoo import model_cache
from ...zoo.recipes import TASKS
from ..profiles.profile import Profile


def model_specs(settings: Profile) -> dict[str, dict]:
    """Every model of ``settings`` by name. A spec with ``seeds: [0, 1, 2]`` stands for one model
    per training seed, named ``<name>@<seed>`` (``seeded_name``), each with that seed in its
    training settings (``fine_tune.seed`` or ``train.seed``) and the same data."""
    specs: dict[str, dict] = {}
    for name, spec in settings.models.items():
        if spec.get("task") not in TASKS:
            raise ValueError(
                f"model {name!r} in profile {settings.name!r} has task {spec.get('task')!r}; the tasks are {TASKS}"
            )
        if "seeds" not in spec:
            specs[name] = spec
            continue
        for seed in _checked_seeds(settings, name, spec):
            specs[seeded_name(name, seed)] = _with_seed(spec, seed)
    return specs


def _checked_seeds(settings: Profile, name: str, spec: dict) -> list[int]:
    seeds = spec["seeds"]
    if (
        not isinstance(seeds, list)
        or not seeds
        or len(set(seeds)) != len(seeds)
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise ValueError(
            f"model {name!r} in profile {settings.name!r} has seeds {seeds!r}; give a list of "
            "distinct integers, e.g. `seeds: [0, 1, 2]`"
        )
    if spec.get("checkpoint") or spec.get("archive"):
        raise ValueError(
            f"model {name!r} in profile {settings.name!r} is a published model (checkpoint or "
            "archive), which is not trained here; drop its `seeds`"
        )
    return seeds


def _training_key(spec: dict) -> str:
    return "train" if spec["task"] == "translation" else "fine_tune"


def _with_seed(spec: dict, seed: int) -> dict:
    key = _training_key(spec)
    out = {k: v for k, v in spec.items() if k != "seeds"}
    out[key] = {**spec.get(key, {}), "seed": seed}
    return out


def seeded_name(name: str, seed: int) -> str:
    """The name of model ``name``'s run with training seed ``seed``: ``nli@1``."""
    return f"{name}@{seed}"


def training_seeds(settings: Profile, name: str) -> list[int]:
    """The training seeds of model ``name``: its ``seeds``, or the one seed its settings name."""
    spec = settings.models.get(name)
    if spec is None:
        raise KeyError(f"profile {settings.name!r} has no model {name!r}; it has {sorted(settings.models)}")
    return list(spec["seeds"]) if "seeds" in spec else [spec.get(_training_key(spec), {}).get("seed", 0)]


def seed_runs(settings: Profile, name: str, limit: int = 0) -> list[tuple[int, str]]:
    """``[(seed, model name)]`` of model ``name``'s training runs, the first ``limit`` of them
    (0: all), for a chapter that repeats its measurement on every run."""
    seeds = training_seeds(settings, name)[: limit or None]
    spec = settings.models[name]
    return [(s, seeded_name(name, s) if "seeds" in spec else name) for s in seeds]


def resolve(settings: Profile, name: str) -> str:
    """``name`` as ``model_specs`` knows it: a model with seeds, named without one, is its first seed's run."""
    specs = model_specs(settings)
    if name in specs:
        return name
    base = settings.models.get(name)
    if base is not None and "seeds" in base:
        return seeded_name(name, base["seeds"][0])
    raise KeyError(f"profile {settings.name!r} has no model {name!r}; it has {sorted(specs)}")


def model_dir(settings: Profile, name: str) -> Path:
    name = resolve(settings, name)
    return model_cache.folder_of(name, model_specs(settings)[name])


def models_key(settings: Profile) -> str:
    """One string that changes whenever any model of ``settings`` would be rebuilt."""
    return json.dumps({name: model_dir(settings, name).name for name in model_specs(settings)}, sort_keys=True)
