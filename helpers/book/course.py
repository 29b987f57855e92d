"""The models of a profile: which ones it has, built once (in the model cache) and loaded by name.

    python -m helpers.book.course --profile course          # build every model (make models)
    python -m helpers.book.course --profile smoke --only nli
    python -m helpers.book.course --profile course --force  # rebuild even if cached
    python -m helpers.book.course --prune                   # delete models no profile uses any more

A profile's ``models`` section names each model: its ``task`` (``nli``, ``acceptability``,
``sentiment``, ``paraphrase`` or ``translation``), the split ``sizes`` of the generated data,
the ``encoder`` to fine-tune (classifiers) and the training settings. ``helpers.zoo.model_cache``
builds each in its own folder and ``helpers.zoo.registry`` loads it; this module adds what a
book run needs on top: under torchrun rank 0 builds and the others wait, the chapters' sweep
caches live in the model's ``sweeps/`` subfolder (``sweep_cache.py``), and
``results/<profile>/models.json`` records, for each model, its task, settings, training time on
the machine that trained it, and its score on every evaluation split.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ..heads.devices import default_device
from ..heads.atomic import atomic_path
from ..zoo import model_cache
from ..zoo.model_cache import subset  # noqa: F401 (chapters draw their examples with course.subset)
from ..zoo.locations import cache_root
from ..zoo.needs import check_local
from ..zoo.recipes import TASKS
from . import shards
from .profiles import PROFILES, load_profile
from .results import results_dir
from .sweep_cache import stale_sweeps


def model_specs(profile: dict) -> dict[str, dict]:
    specs = profile.get("models") or {}
    for name, spec in specs.items():
        if spec.get("task") not in TASKS:
            raise ValueError(f"model {name!r} in profile {profile['name']!r} has task {spec.get('task')!r}; "
                             f"the tasks are {TASKS}")
    return specs


def model_dir(profile: dict, name: str) -> Path:
    specs = model_specs(profile)
    if name not in specs:
        raise KeyError(f"profile {profile['name']!r} has no model {name!r}; it has {sorted(specs)}")
    return model_cache.folder_of(name, specs[name])


def models_key(profile: dict) -> str:
    """One string that changes whenever any model of ``profile`` would be rebuilt."""
    return json.dumps({name: model_dir(profile, name).name for name in model_specs(profile)}, sort_keys=True)


def load_data(profile: dict, name: str) -> dict[str, list]:
    """The splits of model ``name`` (built first if needed): ``{split: [Example or Pair]}``."""
    return model_cache.read_data(ensure_built(profile, name), model_specs(profile)[name]["task"])


# ---- building --------------------------------------------------------------------------------
def build_one(profile: dict, name: str, force: bool = False, progress: bool = True) -> dict:
    """Build model ``name`` of ``profile`` unless its cache folder is complete; return its record."""
    spec = model_specs(profile)[name]
    final = model_dir(profile, name)
    if model_cache.is_built(final) and not force:
        return model_cache.read_record(final)
    status = final.with_name(final.name + ".status")  # rank 0's status, beside the model: partial is renamed
    if shards.rank() > 0:  # under torchrun, rank 0 builds; the others wait for its record
        shards.wait_for_file(final / "record.json", f"model {name} (built by rank 0)", shards.RankLog(status))
        return model_cache.read_record(final)
    check_local({"name": profile["name"], "models": {name: spec}})
    with shards.working(status, f"model {name}"):
        return model_cache.build_into(spec, name, final, progress)


def ensure_built(profile: dict, name: str) -> Path:
    build_one(profile, name)
    return model_dir(profile, name)


def build(profile: dict, only: list[str] | None = None, force: bool = False, progress: bool = True) -> dict:
    """Build (or reuse) every model of ``profile`` and write ``results/<profile>/models.json``."""
    specs = model_specs(profile)
    unknown = set(only or []) - set(specs)
    if unknown:
        raise SystemExit(f"profile {profile['name']!r} has no model(s) {sorted(unknown)}; it has {sorted(specs)}")
    check_local({**profile, "models": {n: s for n, s in specs.items() if not only or n in only}})
    records: dict[str, Any] = {}
    t0 = time.perf_counter()
    for name in specs:
        if only and name not in only:
            continue
        cached = model_cache.is_built(model_dir(profile, name)) and not force
        start = time.perf_counter()
        record = build_one(profile, name, force=force, progress=progress)
        records[name] = {**record, "reused_from_cache": cached, "path": str(model_dir(profile, name))}
        if progress:
            main = record["scores"]
            line = ", ".join(f"{s} {v[record['metric']]:.3f}" for s, v in main.items())
            print(f"[{name}] {'cached' if cached else 'built'} in {time.perf_counter() - start:.0f} s: "
                  f"{record['metric']} {line}", file=sys.stderr, flush=True)
    summary = {"profile": profile["name"], "models": records, "seconds_this_run": time.perf_counter() - t0}
    if not only:
        with atomic_path(results_dir(profile["name"]) / "models.json") as tmp:
            tmp.write_text(json.dumps(summary, indent=2))
    return summary


def records(profile: dict) -> dict[str, dict]:
    """``{name: record}`` of every model of ``profile`` (built first if needed), as in
    models.json but without rewriting it."""
    return {name: build_one(profile, name, progress=False) for name in model_specs(profile)}


def load_classifier(profile: dict, name: str):
    """``(model, tokenizer)`` of a fine-tuned classifier, built first if needed; eval mode, on
    ``default_device()``."""
    model, tokenizer = model_cache.load_built(ensure_built(profile, name))
    return model.to(default_device()), tokenizer


def load_translation(profile: dict, name: str = "translation", epoch: int | None = None):
    """The trained fairseq model (the final one, or the checkpoint after ``epoch``); eval mode,
    on ``default_device()``."""
    return model_cache.load_built(ensure_built(profile, name), epoch)[0].to(default_device())


def sweeps_dir(profile: dict, name: str) -> Path:
    """Where the chapters cache model ``name``'s outputs under head masks (see sweep_cache)."""
    return model_dir(profile, name) / "sweeps"


def stale_folders(profiles: list[dict]) -> list[Path]:
    """Cache folders that no model of ``profiles`` uses any more (older settings or code), and
    sweep folders of current models written by older code; an unfinished ``.partial`` folder of
    a current model is kept, so it can resume."""
    keep = {model_dir(p, name).name for p in profiles for name in model_specs(p)}
    root = cache_root()
    if not root.exists():
        return []
    stale = [d for d in root.iterdir() if d.is_dir() and d.name.removesuffix(".partial") not in keep]
    current = [root / name for name in keep if (root / name).is_dir()]
    return sorted(stale + [s for d in current for s in stale_sweeps(d)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="course")
    parser.add_argument("--only", nargs="*", help="build only these models")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    parser.add_argument("--prune", action="store_true",
                        help="delete cached models that no profile uses any more, then exit")
    args = parser.parse_args(argv)
    if args.prune:
        stale = stale_folders([load_profile(p.stem) for p in sorted(PROFILES.glob("*.yml"))])
        size = sum(f.stat().st_size for d in stale for f in d.rglob("*") if f.is_file())
        for d in stale:
            shutil.rmtree(d)
        print(f"removed {len(stale)} stale model and sweep folders ({size / 2**20:.0f} MiB) from {cache_root()}")
        return
    summary = build(load_profile(args.profile), only=args.only, force=args.force)
    print(f"models of profile {args.profile!r} ready in {summary['seconds_this_run']:.0f} s; "
          f"summary in results/{args.profile}/models.json")


if __name__ == "__main__":
    main()
