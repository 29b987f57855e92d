"""The cache of models generated and trained here: one folder per model.

A model (a ``spec`` from a profile's ``models`` section: its task, data sizes, encoder and
training settings) is built in ``<cache_root()>/<name>-<hash>/``, where the hash covers its
recipe: its settings and what the code that generates its data and trains it computes (the
modules' syntax trees without comments, docstrings and logging, ``base.code_digest``), so a
comment or a log line never retrains a model. A build runs in
``<folder>.partial`` and is renamed only when complete; a finished folder holds:

* ``record.json``: task, settings, training time, the machine, scores on every split;
* ``data/<split>.jsonl``: the examples (generated, or read from the paper's downloads);
* ``model/``: the model as ``save_pruned`` wrote it (``registry.load_model`` reads it);
* ``checkpoints/checkpoint<epoch>``: translation models only, one per epoch.

Its model and data are never written again, so a second build reuses them. An interrupted
translation model resumes from its last finished epoch.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from torch import nn

from ..base.atomic import atomic_path
from ..base.code_digest import recipe_digest
from . import appendix_tasks, competence, nli_task, registry, translation_task
from .locations import cache_root
from .recipes import build_classifier, build_translation, generate_data, machine

# the code that generates a model's data and trains it, relative to helpers/: a change to what
# it computes rebuilds
_SOURCES = (
    "zoo/lexicon.py",
    "zoo/nli_task.py",
    "zoo/appendix_tasks.py",
    "zoo/translation_task.py",
    "zoo/classifier_training.py",
    "zoo/translation_model.py",
    "zoo/decay_ablation.py",
    "zoo/recipes.py",
    "zoo/registry.py",
    "zoo/splits.py",
    "zoo/competence.py",
    "zoo/paper_sources.py",
    "zoo/bible.py",
    "zoo/verse_task.py",
    "zoo/model_cache.py",
    "heads/metrics.py",
    "heads/liveness.py",
)
# how the arithmetic of training runs, beside the code: models trained before flush-to-zero
# (base/denormals.py, set where the book starts) computed on denormal floats and are rebuilt
_NUMERICS = "flush-to-zero"


@functools.lru_cache(maxsize=1)
def _recipe_code_digest() -> str:
    """Digest of what the code that generates and trains the models computes, read once per
    process (``code_digest.recipe_digest`` of ``_SOURCES``)."""
    root = Path(__file__).resolve().parents[1]
    return recipe_digest([root / source for source in _SOURCES], root)


def _spec_hash(name: str, spec: dict) -> str:
    """12 hex digits over the model's recipe: its settings and the code that builds it."""
    h = hashlib.sha256(json.dumps({"name": name, "spec": spec}, sort_keys=True).encode())
    h.update(_recipe_code_digest().encode())
    h.update(_NUMERICS.encode())
    return h.hexdigest()[:12]


def folder_of(name: str, spec: dict) -> Path:
    """``<cache_root()>/<name>-<spec_hash>``: where model ``name`` with settings ``spec`` lives."""
    return cache_root() / f"{name}-{_spec_hash(name, spec)}"


def is_built(folder: Path) -> bool:
    return (folder / "record.json").exists()


def read_record(folder: Path) -> dict:
    return json.loads((folder / "record.json").read_text())


# ---- building ----------------------------------------------------------------------------------
def _write_data(data: dict[str, list], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for split, examples in data.items():
        with atomic_path(directory / f"{split}.jsonl") as tmp:
            tmp.write_text("".join(json.dumps(dataclasses.asdict(e)) + "\n" for e in examples))


Progress = bool | Literal["lines"]


def log_line(line: str) -> None:
    """Write ``line`` to stderr in one write: processes that build side by side share the stream,
    and ``print`` writes the text and its newline separately, so their lines could interleave."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def build_into(spec: dict, name: str, final: Path, progress: Progress = True) -> dict:
    """Generate the data and train model ``name`` in ``<final>.partial``, then rename it to
    ``final``; returns its record. ``progress``: True shows bars and lines, ``"lines"`` only
    lines (a start line, and one per translation epoch, each led by ``[name]``: what a build
    in several processes can show without bars overwriting each other), False nothing.

    Where the spec states a competence rule (``competence.rule_of``), a run below its floor is
    rejected and the model trained again with the next seed (``competence.retry_seeds``); the
    record lists the rejected runs (``rejected``) and the seed the kept run trained with
    (``trained_seed``). ``partial/rejected.json`` keeps them while the build runs, so an
    interrupted translation build resumes with the seed it was on (a classifier restarts from
    its first seed, as it restarts its training, and gets the same runs again)."""
    partial = final.with_name(final.name + ".partial")
    if spec["task"] != "translation" and partial.exists():
        shutil.rmtree(partial)  # a classifier restarts; only translation training resumes
    partial.mkdir(parents=True, exist_ok=True)
    data = generate_data(spec)
    _write_data(data, partial / "data")

    def log(line: str) -> None:
        log_line(f"[{name}] {line}")

    rule = competence.rule_of(spec)
    seed = training_seed(spec)
    seeds = competence.retry_seeds(seed, rule.tries) if rule and seed is not None else [seed]
    rejected_file = partial / "rejected.json"
    rejected = json.loads(rejected_file.read_text()) if rejected_file.exists() else []
    for seed in seeds[len(rejected) :]:
        built = _train(_with_training_seed(spec, seed), data, partial=partial, progress=progress, log=log)
        if rule is None or seed is None:
            break
        judged = competence.judge(rule, built, seed)
        if judged.passed:
            break
        rejected.append({**judged.as_dict(), "train_seconds": built["train_seconds"]})
        if progress:
            log(f"seed {seed} failed its competence rule ({judged.reason()}): rejected")
        with atomic_path(rejected_file) as tmp:
            tmp.write_text(json.dumps(rejected))
        for trained in ("model", "checkpoints"):  # the next seed trains from scratch
            shutil.rmtree(partial / trained, ignore_errors=True)
    else:
        scores = ", ".join(
            f"seed {r['seed']}: {r['score']:.3f}"
            + (f" with {len(r['dead_heads'])} dead heads" if r["dead_heads"] else "")
            for r in rejected
        )
        raise competence.IncompetentModel(
            f"model {name}: every seed tried failed its competence rule {rule.text()} ({scores}; floor "
            f"{rejected[-1]['floor']:.3f}): the recipe, not the seed, is at fault; change its training settings "
            f"(or the floor, with a reason) in the profile"
        )
    record = {
        "name": name,
        "task": spec["task"],
        "spec": spec,
        "hash": final.name.rsplit("-", 1)[1],
        **built,
        "trained_seed": seed,
        "rejected": rejected,
        "machine": machine(),
        "built": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    record["sizes"] = {split: len(examples) for split, examples in data.items()}
    rejected_file.unlink(missing_ok=True)
    with atomic_path(partial / "record.json") as tmp:
        tmp.write_text(json.dumps(record, indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(partial, final)
    return record


def _train(spec: dict, data: dict, *, partial: Path, progress: Progress, log) -> dict:
    if progress:
        log(f"training ({spec['task']}, seed {training_seed(spec)}) in {partial}")
    bars = progress is True
    return (
        build_translation(spec, data, directory=partial, progress=bars, log=log if progress else None)
        if spec["task"] == "translation"
        else build_classifier(spec, data, partial, bars)
    )


def _seed_section(spec: dict) -> str:
    return "train" if spec["task"] == "translation" else "fine_tune"


def training_seed(spec: dict) -> int | None:
    """The seed ``spec`` trains with (``train.seed`` or ``fine_tune.seed``; a recipe's default 0
    where it names none); None for a published model that is scored, not trained."""
    if spec.get("archive") or spec.get("checkpoint"):
        return None
    return int(spec.get(_seed_section(spec), {}).get("seed", 0))


def _with_training_seed(spec: dict, seed: int | None) -> dict:
    """``spec`` training with ``seed`` (unchanged where ``seed`` is None)."""
    if seed is None:
        return spec
    section = _seed_section(spec)
    return {**spec, section: {**spec.get(section, {}), "seed": seed}}


# ---- reading -----------------------------------------------------------------------------------
_EXAMPLE_TYPES = {"nli": nli_task.Example, "translation": translation_task.Pair}


def read_data(folder: Path, task: str) -> dict[str, list]:
    """The splits stored with a built model: ``{split: [Example or Pair]}``."""
    cls = _EXAMPLE_TYPES.get(task, appendix_tasks.Example)
    out = {}
    for path in sorted((folder / "data").glob("*.jsonl")):
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


def load_built(folder: Path, epoch: int | None = None) -> tuple[nn.Module, object]:
    """``(model, tokenizer or None)`` of a built model, the final one or the checkpoint after
    ``epoch`` (translation models), through the registry's ``trained`` source; eval mode, CPU."""
    if epoch is None:
        return registry.load_model(folder / "model")
    path = folder / "checkpoints" / f"checkpoint{epoch}"
    if not path.exists():
        have = sorted(int(p.name.removeprefix("checkpoint")) for p in (folder / "checkpoints").glob("checkpoint*"))
        raise FileNotFoundError(f"{folder.name} has no checkpoint for epoch {epoch}; it has epochs {have}")
    return registry.load_model(path)
