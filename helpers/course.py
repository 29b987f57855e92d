"""Build, cache and load the models and data that a profile's notebooks study.

    python -m helpers.course --profile course          # build every model (make models)
    python -m helpers.course --profile smoke --only nli
    python -m helpers.course --profile course --force  # rebuild even if cached
    python -m helpers.course --prune                   # delete models no profile uses any more

A profile's ``models`` section names each model: its ``task`` (``nli``, ``acceptability``,
``sentiment``, ``paraphrase`` or ``translation``), the split ``sizes`` of the generated data,
the ``encoder`` to fine-tune (classifiers) and the training settings. Each model is built in
``.cache/models/<name>-<hash>/``, where the hash covers its settings and the source of the code
that generates its data and trains it; a finished folder holds ``record.json``, and its model
and data are never written again, so a second build reuses them. Its ``sweeps/`` subfolder
caches the model's outputs under head masks (``helpers/sweep_cache.py``) for the chapters. A
build runs in ``<folder>.partial`` and is renamed only when complete; an interrupted
translation model resumes from its last finished epoch.

``results/<profile>/models.json`` records, for each model, its task, settings, training time
on the machine that trained it, and its score on every evaluation split.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from . import appendix_tasks, nli_task, shards, translation_task
from .atomic import atomic_path
from .devices import default_device
from .course_training import TASKS, build_classifier, build_translation, generate_data, machine
from .paper_sources import check_local
from .results import ROOT, results_dir
from .sweep_cache import stale_sweeps

_SOURCES = ("lexicon.py", "nli_task.py", "appendix_tasks.py", "translation_task.py", "classifier_training.py",
            "translation_model.py", "course_training.py", "models.py", "metrics.py", "splits.py", "paper_sources.py")


def cache_root() -> Path:
    """``$SIXTEEN_HEADS_CACHE`` or ``<repo>/.cache/models``."""
    return Path(os.environ.get("SIXTEEN_HEADS_CACHE", ROOT / ".cache" / "models"))


def model_specs(profile: dict) -> dict[str, dict]:
    specs = profile.get("models") or {}
    for name, spec in specs.items():
        if spec.get("task") not in TASKS:
            raise ValueError(f"model {name!r} in profile {profile['name']!r} has task {spec.get('task')!r}; "
                             f"the tasks are {TASKS}")
    return specs


@functools.lru_cache(maxsize=1)
def _code_digest() -> bytes:
    """Digest of the code that generates and trains the models, read once per process."""
    h = hashlib.sha256()
    for source in _SOURCES:
        h.update((Path(__file__).parent / source).read_bytes())
    return h.digest()


def spec_hash(name: str, spec: dict) -> str:
    """12 hex digits over the model's settings and the code that builds it."""
    h = hashlib.sha256(json.dumps({"name": name, "spec": spec}, sort_keys=True).encode())
    h.update(_code_digest())
    return h.hexdigest()[:12]


def model_dir(profile: dict, name: str) -> Path:
    specs = model_specs(profile)
    if name not in specs:
        raise KeyError(f"profile {profile['name']!r} has no model {name!r}; it has {sorted(specs)}")
    return cache_root() / f"{name}-{spec_hash(name, specs[name])}"


def models_key(profile: dict) -> str:
    """One string that changes whenever any model of ``profile`` would be rebuilt."""
    return json.dumps({name: model_dir(profile, name).name for name in model_specs(profile)}, sort_keys=True)


# ---- data ----------------------------------------------------------------------------------
_EXAMPLE_TYPES = {"nli": nli_task.Example, "translation": translation_task.Pair}


def _write_data(data: dict[str, list], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for split, examples in data.items():
        with atomic_path(directory / f"{split}.jsonl") as tmp:
            tmp.write_text("".join(json.dumps(dataclasses.asdict(e)) + "\n" for e in examples))


def load_data(profile: dict, name: str) -> dict[str, list]:
    """The generated splits of model ``name`` (built first if needed): ``{split: [Example or Pair]}``."""
    directory = ensure_built(profile, name)
    cls = _EXAMPLE_TYPES.get(model_specs(profile)[name]["task"], appendix_tasks.Example)
    out = {}
    for path in sorted((directory / "data").glob("*.jsonl")):
        out[path.stem] = [cls(**json.loads(line)) for line in path.read_text().splitlines()]
    return out


def subset(examples: Sequence, n: int, seed: int = 0) -> list:
    """``n`` examples drawn at random (fixed ``seed``, so every chapter draws the same ones and
    shares their cached sweeps), kept in their original order; all of them when ``n`` is 0 or
    at least their number. Not the first ``n``: generated splits are filled label by label, so a
    prefix is not representative (the first 300 of ``nli``'s matched split are 58% neutral)."""
    if not n or n >= len(examples):
        return list(examples)
    return [examples[i] for i in sorted(random.Random(seed).sample(range(len(examples)), n))]


# ---- building --------------------------------------------------------------------------------
def build_one(profile: dict, name: str, force: bool = False, progress: bool = True) -> dict:
    """Build model ``name`` of ``profile`` unless its cache folder is complete; return its record."""
    spec = model_specs(profile)[name]
    final = model_dir(profile, name)
    if (final / "record.json").exists() and not force:
        return json.loads((final / "record.json").read_text())
    status = final.with_name(final.name + ".status")  # rank 0's status, beside the model: partial is renamed
    if shards.rank() > 0:  # under torchrun, rank 0 builds; the others wait for its record
        shards.wait_for_file(final / "record.json", f"model {name} (built by rank 0)", shards.RankLog(status))
        return json.loads((final / "record.json").read_text())
    check_local({"name": profile["name"], "models": {name: spec}})
    with shards.working(status, f"model {name}"):
        return _build_into(spec, name, final, progress)


def _build_into(spec: dict, name: str, final: Path, progress: bool) -> dict:
    """Generate the data and train model ``name`` in ``<final>.partial``, then rename it to ``final``."""
    partial = final.with_name(final.name + ".partial")
    if spec["task"] != "translation" and partial.exists():
        shutil.rmtree(partial)  # a classifier restarts; only translation training resumes
    partial.mkdir(parents=True, exist_ok=True)
    data = generate_data(spec)
    _write_data(data, partial / "data")
    if progress:
        print(f"[{name}] training ({spec['task']}) in {partial}", file=sys.stderr, flush=True)
    build = build_translation if spec["task"] == "translation" else build_classifier
    record = {"name": name, "task": spec["task"], "spec": spec, "hash": final.name.rsplit("-", 1)[1],
              **build(spec, data, partial, progress), "machine": machine(),
              "built": time.strftime("%Y-%m-%d %H:%M:%S")}
    record["sizes"] = {split: len(examples) for split, examples in data.items()}
    with atomic_path(partial / "record.json") as tmp:
        tmp.write_text(json.dumps(record, indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(partial, final)
    return record


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
        cached = (model_dir(profile, name) / "record.json").exists() and not force
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
    """``(model, tokenizer)`` of a fine-tuned classifier, built first if needed; eval mode."""
    from transformers import AutoTokenizer

    from .pruning import load_pruned

    directory = ensure_built(profile, name) / "model"
    return load_pruned(directory).to(default_device()), AutoTokenizer.from_pretrained(directory)


def load_translation(profile: dict, name: str = "translation", epoch: int | None = None):
    """The trained fairseq model (the final one, or the checkpoint after ``epoch``); eval mode,
    on ``default_device()``."""
    from .pruning import load_pruned

    directory = ensure_built(profile, name)
    if epoch is None:
        return load_pruned(directory / "model").to(default_device())
    path = directory / "checkpoints" / f"checkpoint{epoch}"
    if not path.exists():
        have = sorted(int(p.name.removeprefix("checkpoint")) for p in (directory / "checkpoints").glob("checkpoint*"))
        raise FileNotFoundError(f"{name} has no checkpoint for epoch {epoch}; it has epochs {have}")
    return load_pruned(path).to(default_device())


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
    from .runner import PROFILES, load_profile

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
