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

from .building import (
    BUILD_PROCESSES_ENV,
    build,
    build_arm,
    build_one,
    build_processes,
    decay_arms,
    ensure_built,
    main,
    prepare_shipped_lm,
    stale_folders,
)
from .loading import (
    first_seed,
    load_classifier,
    load_data,
    load_translation,
    over_seeds,
    records,
    subset,
    subset_positions,
    sweeps_dir,
)
from .specs import model_dir, model_specs, models_key, resolve, seed_runs, seeded_name, training_seeds

__all__ = [
    "BUILD_PROCESSES_ENV",
    "build",
    "build_arm",
    "build_one",
    "decay_arms",
    "build_processes",
    "ensure_built",
    "main",
    "prepare_shipped_lm",
    "stale_folders",
    "first_seed",
    "load_classifier",
    "load_data",
    "load_translation",
    "over_seeds",
    "records",
    "subset",
    "subset_positions",
    "sweeps_dir",
    "model_dir",
    "model_specs",
    "models_key",
    "resolve",
    "seed_runs",
    "seeded_name",
    "training_seeds",
]
