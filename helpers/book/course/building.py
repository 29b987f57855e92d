"""Building a profile's models: once each, in the model cache, in a pool of one-thread processes
on a CPU, rank 0 alone under torchrun; ``results/<profile>/models.json`` records them; the CLI."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ...base.atomic import atomic_path
from ...base.denormals import flush_denormals
from ...base.devices import default_device
from ...heads.liveness import dead_heads
from ...zoo import decay_ablation, model_cache
from ...zoo.locations import cache_root
from ...zoo.needs import check_local
from ...zoo.recipes import machine_info
from ..profiles.profile import PROFILES, Profile, chapter_parameters, load_profile
from ..store import shards
from ..store.progress import estimate_left, progress_line, recorded_model_seconds
from ..store.results import results_dir
from ..store.sweep_cache import stale_sweeps
from .specs import model_dir, model_specs, resolve, seed_runs


def build_one(settings: Profile, name: str, force: bool = False, progress: model_cache.Progress = True) -> dict:
    """Build model ``name`` of ``settings`` unless its cache folder is complete; return its record.
    ``progress``: as ``model_cache.build_into`` (``"lines"``: lines, no bars)."""
    name = resolve(settings, name)
    spec = model_specs(settings)[name]
    final = model_dir(settings, name)
    build = partial(model_cache.build_into, spec, name, final, progress)
    return _built_once(settings, name, spec=spec, final=final, build=build, force=force)


def _built_once(
    settings: Profile, name: str, *, spec: dict, final: Path, build: Callable[[], dict], force: bool
) -> dict:
    """The record in ``final``, built there first by ``build()`` unless complete (or ``force``);
    under torchrun rank 0 builds and the others wait for its record."""
    if model_cache.is_built(final) and not force:
        return model_cache.read_record(final)
    status = final.with_name(final.name + ".status")  # rank 0's status, beside the model: partial is renamed
    if shards.rank() > 0:
        shards.wait_for_file(final / "record.json", f"model {name} (built by rank 0)", shards.RankLog(status))
        return model_cache.read_record(final)
    check_local(settings.name, {name: spec})
    with shards.working(status, f"model {name}"):
        return build()


DECAY_ABLATION_CHAPTER = "02_course_models"  # the chapter whose `decay_ablation_epochs` sizes the ablation


def decay_arms(settings: Profile, epochs: int) -> dict[str, tuple[dict, Path]]:
    """``{arm name: (spec, cache folder)}`` of chapter 02's weight-decay ablation
    (``zoo.decay_ablation``): the recipe of the profile's ``translation`` model (its first training
    run) for ``epochs`` epochs in each arm. Empty where ``epochs`` is 0 or the profile trains no
    translation model here (the paper profile's is the published WMT model)."""
    if not epochs or "translation" not in settings.models:
        return {}
    spec = model_specs(settings)[resolve(settings, "translation")]
    if spec.get("archive") or spec.get("checkpoint"):
        return {}
    return {
        decay_ablation.arm_name("translation", arm): (
            decay_ablation.arm_spec(spec, arm, epochs),
            decay_ablation.arm_folder("translation", spec, arm, epochs),
        )
        for arm in decay_ablation.ARMS
    }


def profile_decay_arms(settings: Profile) -> dict[str, tuple[dict, Path]]:
    """``decay_arms`` at the epochs the profile gives chapter 02 (what ``make models`` builds)."""
    return decay_arms(settings, chapter_parameters(settings, DECAY_ABLATION_CHAPTER).get("decay_ablation_epochs", 0))


def build_arm(
    settings: Profile, name: str, arm: tuple[dict, Path], force: bool = False, progress: model_cache.Progress = True
) -> dict:
    """Arm ``name`` (``decay_arms``' ``(spec, folder)``), built unless its folder is complete; its record."""
    spec, final = arm
    build = partial(decay_ablation.build_arm, spec, name, final, progress)
    return _built_once(settings, name, spec=spec, final=final, build=build, force=force)


def ensure_built(settings: Profile, name: str) -> Path:
    build_one(settings, name)
    return model_dir(settings, name)


BUILD_PROCESSES_ENV = "SIXTEEN_HEADS_BUILD_PROCESSES"


def build_processes() -> int:
    """How many processes ``build`` trains models in: ``$SIXTEEN_HEADS_BUILD_PROCESSES`` if set;
    else 1 on a GPU and under torchrun, and on a Linux CPU with 2 or more cores 2, each with one
    torch thread. Small models keep two cores busier as two one-thread processes than as one
    two-thread process (on the course models' 2-core CPU: about 1.3 times the tokens per
    second); a model trained with one thread differs from one trained with two in the last
    bits of its floats, and either is reused from the cache."""
    from ...base.cores import usable_cores

    chosen = os.environ.get(BUILD_PROCESSES_ENV)
    if chosen:
        if not chosen.isdigit() or int(chosen) < 1:
            raise ValueError(
                f"${BUILD_PROCESSES_ENV} must be a whole number >= 1 (1: build in this process), got {chosen!r}"
            )
        return int(chosen)
    if sys.platform != "linux" or shards.world_size() > 1 or default_device().type != "cpu":
        return 1
    return 2 if usable_cores() >= 2 else 1


def _cost(spec: dict) -> float:
    """A rough order of training cost, to start the longest builds first."""
    train = spec.get("train") or spec.get("fine_tune") or {}
    return (100.0 if spec["task"] == "translation" else 1.0) * float(train.get("epochs", 1))


def _build_in_worker(
    settings: Profile, name: str, arm: tuple[dict, Path] | None, force: bool, progress: bool
) -> tuple[dict, float]:
    """Model ``name``, or ablation arm ``name`` where ``arm`` is given, built with one thread."""
    from transformers.utils import logging as transformers_logging

    torch.set_num_threads(1)
    transformers_logging.disable_progress_bar()  # its loading and saving bars, in this process only
    start = time.perf_counter()
    lines = "lines" if progress else False
    if arm is not None:
        return build_arm(settings, name, arm, force=force, progress=lines), time.perf_counter() - start
    return build_one(settings, name, force=force, progress=lines), time.perf_counter() - start


def _prepare_in_worker(settings: Profile, progress: bool) -> None:
    torch.set_num_threads(1)
    prepare_shipped_lm(settings, progress)


def _build_in_processes(
    settings: Profile,
    names: list[str],
    *,
    processes: int,
    force: bool,
    progress: bool,
    report: Callable[[str, dict, float, bool], None],
    shipped: bool = False,
    arms: dict[str, tuple[dict, Path]] | None = None,
) -> None:
    """Build ``names`` and the ablation's ``arms`` (``decay_arms``) in ``processes`` spawned
    processes of one thread each, longest first; with ``progress``, each process logs lines (no
    bars) as it trains. ``shipped``: convert the shipped LM too (``prepare_shipped_lm``), last, in
    the first process left without a model to train, instead of after them all with a core idle
    (17 s of the course build)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    arms = arms or {}
    jobs = {name: (model_specs(settings)[name], None) for name in names} | {n: (a[0], a) for n, a in arms.items()}
    order = sorted(jobs, key=lambda n: _cost(jobs[n][0]), reverse=True)
    context = get_context("spawn")  # a spawned worker starts with the CPU's default float mode: set it first
    with ProcessPoolExecutor(max_workers=processes, mp_context=context, initializer=flush_denormals) as pool:
        futures = {
            pool.submit(_build_in_worker, settings, name, jobs[name][1], force, progress): name for name in order
        }
        if shipped:
            futures[pool.submit(_prepare_in_worker, settings, progress)] = None
        for future in as_completed(futures):
            if futures[future] is None:
                future.result()
                continue
            record, seconds = future.result()
            report(futures[future], record, seconds, False)


def build(
    settings: Profile,
    only: list[str] | None = None,
    *,
    force: bool = False,
    progress: bool = True,
    processes: int | None = None,
) -> dict:
    """Build (or reuse) every model of ``settings``, and (unless ``only``) the arms of chapter 02's
    weight-decay ablation (``profile_decay_arms``), and write ``results/<profile>/models.json``
    (the arms' records under ``ablations``); models still to train are built in ``processes``
    processes (None: ``build_processes()``)."""
    specs = model_specs(settings)
    if only:  # a model with seeds, named without one, stands for all its runs
        runs = {n: [m for _, m in seed_runs(settings, n)] for n in only if n not in specs and n in settings.models}
        unknown = set(only) - set(specs) - set(runs)
        if unknown:
            raise SystemExit(f"profile {settings.name!r} has no model(s) {sorted(unknown)}; it has {sorted(specs)}")
        only = [m for n in only for m in runs.get(n, [n])]
    check_local(settings.name, {n: s for n, s in specs.items() if not only or n in only})
    records: dict[str, Any] = {}
    t0 = time.perf_counter()
    wanted = [name for name in specs if not only or name in only]
    todo = [name for name in wanted if force or not model_cache.is_built(model_dir(settings, name))]
    arms = {} if only else profile_decay_arms(settings)
    arms_todo = {n: a for n, a in arms.items() if force or not model_cache.is_built(a[1])}
    ablations: dict[str, Any] = {}
    done: list[str] = []
    recorded = recorded_model_seconds(settings.name)  # the last build's, for the estimate
    processes = build_processes() if processes is None else processes

    def report(name: str, record: dict, seconds: float, cached: bool) -> None:
        if name in arms:
            ablations[name] = {**record, "reused_from_cache": cached, "path": str(arms[name][1])}
            if progress:
                dead = len(dead_heads(record["epochs"][-1]["head_norms"]))
                how = "cached" if cached else f"built in {seconds:.0f} s"
                model_cache.log_line(f"[{name}] {how}; dead heads after its last epoch: {dead}")
            return
        records[name] = {**record, "reused_from_cache": cached, "path": str(model_dir(settings, name))}
        done.append(name)
        if progress:
            line = ", ".join(f"{s} {v[record['metric']]:.3f}" for s, v in record["scores"].items())
            left = estimate_left([n for n in todo if n not in done], recorded, processes)
            model_cache.log_line(
                progress_line(
                    len(done),
                    len(wanted),
                    name=f"[{name}] {'cached' if cached else f'built in {seconds:.0f} s'}",
                    elapsed=time.perf_counter() - t0,
                    estimate=left,
                )
                + f"; {record['metric']} {line}"
            )

    if progress:
        for name in todo:
            model_cache.log_line(_cache_line(settings, name, force))
    pooled = processes > 1 and len(todo) + len(arms_todo) > 1  # the pool also converts the shipped LM
    if pooled:
        if progress:
            model_cache.log_line(
                f"building {len(todo)} models"
                + (f" and {len(arms_todo)} arms of the weight-decay ablation" if arms_todo else "")
                + f" in {processes} processes of one thread each (${BUILD_PROCESSES_ENV}=1: one at a time)"
            )
        _build_in_processes(
            settings,
            todo,
            processes=processes,
            force=force,
            progress=progress,
            report=report,
            shipped=not only,
            arms=arms_todo,
        )
    for name in [*wanted, *arms]:
        if name in records or name in ablations:
            continue
        cached = name not in todo and name not in arms_todo
        start = time.perf_counter()
        if name in arms:
            record = build_arm(settings, name, arms[name], force=force, progress=progress)
        else:
            record = build_one(settings, name, force=force, progress=progress)
        report(name, record, time.perf_counter() - start, cached)
    records = {name: records[name] for name in wanted}  # in the profile's order
    if not only and not pooled:
        prepare_shipped_lm(settings, progress)
    summary = {
        "profile": settings.name,
        "machine": machine_info(),
        "models": records,
        "ablations": {name: ablations[name] for name in arms},
        "seconds_this_run": time.perf_counter() - t0,
    }
    if not only:
        with atomic_path(results_dir(settings.name) / "models.json") as tmp:
            tmp.write_text(json.dumps(summary, indent=2))
    return summary


def _cache_line(settings: Profile, name: str, force: bool) -> str:
    """Why model ``name`` is (re)built: forced, never built, or built only with another recipe
    (settings, or what the training code computes), whose folders stay until ``--prune``."""
    final = model_dir(settings, name)
    if force:
        return f"[{name}] rebuilding ({final.name}): --force"
    older = sorted(
        d.name
        for d in final.parent.glob(f"{name}-*")
        if d.is_dir() and d.name.removesuffix(".partial") != final.name and model_cache.is_built(d)
    )
    if final.with_name(final.name + ".partial").exists():
        return f"[{name}] resuming the unfinished build {final.name}.partial"
    if older:
        return (
            f"[{name}] building anew as {final.name}: the cache holds {', '.join(older)}, built with another "
            "recipe (settings or training code); `python -m helpers.book.course --prune` removes it"
        )
    return f"[{name}] building {final.name}: not in the cache yet"


def prepare_shipped_lm(settings: Profile, progress: bool = True) -> None:
    """Convert SmolLM2's GGUF file once (shipped.smollm2_folder) when the profile's chapter 11
    reads it (``registry.reads_smollm2``: SmolLM2, or a tiny Llama for its tokenizer), so that
    the chapter's timed run only loads it."""
    from ...zoo import shipped
    from ...zoo.registry import reads_smollm2

    if not reads_smollm2(chapter_parameters(settings, "11_nine_heads")["language_model"]):
        return
    start = time.perf_counter()
    folder = shipped.smollm2_folder()
    if progress:
        model_cache.log_line(f"[smollm2] ready in {time.perf_counter() - start:.0f} s: {folder}")


def stale_folders(profiles: list[Profile]) -> list[Path]:
    """Cache folders that no model of ``profiles`` uses any more (older settings or code), and
    sweep folders of current models written by older code; an unfinished ``.partial`` folder of
    a current model is kept, so it can resume."""
    keep = {model_dir(p, name).name for p in profiles for name in model_specs(p)}
    keep |= {folder.name for p in profiles for _, folder in profile_decay_arms(p).values()}
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
    parser.add_argument(
        "--prune", action="store_true", help="delete cached models that no profile uses any more, then exit"
    )
    args = parser.parse_args(argv)
    flush_denormals()  # training from scratch makes denormal weights (helpers/base/denormals.py)
    if args.prune:
        stale = stale_folders([load_profile(p.stem) for p in sorted(PROFILES.glob("*.yml"))])
        size = sum(f.stat().st_size for d in stale for f in d.rglob("*") if f.is_file())
        for d in stale:
            shutil.rmtree(d)
        print(f"removed {len(stale)} stale model and sweep folders ({size / 2**20:.0f} MiB) from {cache_root()}")
        return
    summary = build(load_profile(args.profile), only=args.only, force=args.force)
    where = f"summary in {results_dir(args.profile) / 'models.json'}" if not args.only else "no summary (--only)"
    print(f"models of profile {args.profile!r} ready in {summary['seconds_this_run']:.0f} s; {where}")
