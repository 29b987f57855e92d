"""Where weight decay enters Adam, and the heads it kills: chapter 02's ablation.

A translation model's recipe (its spec) is trained for a few epochs from the same seed and data
in three arms (``ARMS``): weight decay *coupled* into the gradient before Adam divides it by its
running scale (``torch.optim.Adam(weight_decay=...)``, this project's recipe until chapter 02
found the heads it had killed), *decoupled* from it (fairseq's Adam, as the authors trained: the
recipe now) and *none*. The cosine schedule runs to zero over the arm's own epochs, so that a
short arm ends annealed as the full recipe does. After every epoch an arm records its losses and
each head's |V_h|·|O_h| (``heads.liveness.head_norms``); chapter 02 counts the dead heads.

Each arm is built once, like a model, in ``<cache_root()>/<model>~decay-<arm>-<hash>/``
(``model_cache.folder_of``: the hash covers the arm's recipe and the training code), which holds
only ``record.json``; an interrupted arm resumes from its last finished epoch.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ..base.atomic import atomic_path
from . import model_cache

ARMS: dict[str, dict] = {
    "coupled": {"decay": "coupled"},  # torch.optim.Adam's weight_decay: the recipe before
    "decoupled": {"decay": "decoupled"},  # fairseq's Adam: the recipe now
    "none": {"weight_decay": 0.0},
}


def arm_name(model: str, arm: str) -> str:
    """``translation~decay-coupled``: the cache name of ``model``'s arm ``arm``."""
    return f"{model}~decay-{arm}"


def arm_spec(spec: dict, arm: str, epochs: int) -> dict:
    """``spec`` (a translation model's, with its training seed) trained ``epochs`` epochs as arm
    ``arm`` says; no competence rule (an arm is measured, not studied)."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r} of the weight-decay ablation; the arms are {sorted(ARMS)}")
    if epochs < 1:
        raise ValueError(f"an arm of the weight-decay ablation trains at least 1 epoch, not {epochs}")
    train = {**spec.get("train", {}), **ARMS[arm], "epochs": epochs}
    return {**{k: v for k, v in spec.items() if k not in ("competence", "train")}, "train": train}


def arm_folder(model: str, spec: dict, arm: str, epochs: int) -> Path:
    """Where ``model``'s arm ``arm`` of ``epochs`` epochs lives in the model cache."""
    return model_cache.folder_of(arm_name(model, arm), arm_spec(spec, arm, epochs))


def build_arm(spec: dict, name: str, final: Path, progress: model_cache.Progress = True) -> dict:
    """Train arm ``spec`` (``arm_spec``) in ``<final>.partial`` and rename it to ``final``; returns
    its record: ``name``, ``spec``, ``train_seconds``, ``machine``, ``built`` and ``epochs``, one
    entry per epoch (``train_loss``, ``valid_loss``, ``seconds``, ``head_norms``). ``progress`` as
    ``model_cache.build_into`` (``"lines"``: one line per epoch)."""
    from ..heads.pruning import load_pruned
    from .recipes import generate_data, head_norm_lists, machine
    from .translation_model import TranslationConfig, model_for, train

    partial = final.with_name(final.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    data = generate_data(spec)
    config = TranslationConfig(**spec["train"])
    model = model_for(data["train"], config)

    def log(line: str) -> None:
        model_cache.log_line(f"[{name}] {line}")

    if progress:
        log(f"training the weight-decay ablation's arm ({config.epochs} epochs) in {partial}")
    checkpoints = partial / "checkpoints"
    history = train(
        model,
        data["train"],
        valid_pairs=data["valid"],
        config=config,
        directory=checkpoints,
        progress=progress is True,
        log=log if progress else None,
    )
    epochs = [
        {**h, "head_norms": head_norm_lists(load_pruned(checkpoints / f"checkpoint{h['epoch']}"))} for h in history
    ]
    record = {
        "name": name,
        "task": "translation",
        "spec": spec,
        "train_seconds": sum(h["seconds"] for h in history),
        "epochs": epochs,
        "machine": machine(),
        "built": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    with atomic_path(partial / "record.json") as tmp:
        tmp.write_text(json.dumps(record, indent=2))
    shutil.rmtree(checkpoints)  # the norms are kept; the weights are not studied
    if final.exists():
        shutil.rmtree(final)
    os.replace(partial, final)
    return record
