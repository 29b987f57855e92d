"""A disk cache for a model's outputs under head-mask configurations (one JSON file each).

Two chapters often need the same sweep: §3.4 compares the in-domain scores of §3.2's one-head
ablation with out-of-domain ones, and a rebuilt book should not decode 144 configurations again.
A ``SweepCache`` is a folder for one model on one exact list of inputs with one set of
evaluation settings (beam, batch size, ...); each configuration's outputs (hypotheses or
predicted labels, one per input) are written atomically as soon as they are computed, so an
interrupted sweep resumes where it stopped.

``sweep_key`` names the folder: a digest of the inputs, the settings and what the code that
masks heads and decodes computes (its syntax trees without comments, docstrings and logging,
``base.code_digest``), so changing any of them starts a new folder instead of reading stale
outputs, while a comment or a reworded log line keeps the cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...base.atomic import atomic_path
from ...base.code_digest import recipe_digest
from ...sweeps.ablation import UNMASKED, Config
from . import shards

# the source that computes sweep outputs, relative to helpers/
_CODE = (
    "heads/gates.py",
    "heads/sites.py",
    "sweeps/ablation.py",
    "sweeps/config_batches.py",
    "heads/removal.py",
    "zoo/causal_lm.py",
    "zoo/translation_model.py",
    "zoo/sweep_decoder.py",
    "zoo/classifier_training.py",
    "zoo/scorers.py",
    "book/experiments/head_effects.py",
)


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """8 hex digits over what the code that computes sweep outputs computes."""
    root = Path(__file__).resolve().parents[2]
    return recipe_digest([root / source for source in _CODE], root)[:8]


def sweep_key(inputs: Sequence[Any], options: dict) -> str:
    """``<code digest>-<12 hex digits over inputs and the sweep's options>`` (batch size, beam, ...);
    inputs must be JSON-able."""
    h = hashlib.sha256(json.dumps({"inputs": list(inputs), "settings": options}, sort_keys=True).encode())
    return f"{code_digest()}-{h.hexdigest()[:12]}"


def _file_name(config: Config) -> str:
    kind, layer, heads = config
    if config == UNMASKED:
        return "unmasked.json"
    return f"{kind}-L{layer}-mask{'.'.join(map(str, heads)) or 'none'}.json"


class DamagedEntryWarning(UserWarning):
    """A sweep cache file could not be read; it was set aside and its configuration is computed again."""


class SweepCache:
    """Outputs per configuration in ``directory``; ``SweepCache(None)`` keeps them in memory only.
    ``length``: the number of inputs, which every stored list must have.

    A file that cannot be read back (cut short by a full disk, edited by hand, not a list of
    ``length`` outputs) is a damaged entry: it is renamed ``<file>.damaged``, a
    ``DamagedEntryWarning`` names it, and its configuration counts as missing, so the sweep
    computes it again; the other entries are kept."""

    def __init__(self, directory: Path | str | None, length: int | None = None):
        self.directory = None if directory is None else Path(directory)
        self.length = length
        self._memory: dict[Config, list] = {}

    def get(self, config: Config) -> list | None:
        if self.directory is None or config in self._memory:
            return self._memory.get(config)
        path = self.directory / _file_name(config)
        if not path.exists():
            return None
        outputs = self._read(path)
        if outputs is not None:
            self._memory[config] = outputs
        return outputs

    def _read(self, path: Path) -> list | None:
        try:
            outputs = json.loads(path.read_text())
            if not isinstance(outputs, list) or (self.length is not None and len(outputs) != self.length):
                got = f"{len(outputs)} outputs" if isinstance(outputs, list) else type(outputs).__name__
                raise ValueError(f"it holds {got}, not a list of {self.length}")
        except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
            aside = path.with_name(path.name + ".damaged")
            os.replace(path, aside)
            warnings.warn(
                f"the sweep cache entry {path} is damaged ({err}); it was moved to {aside.name} and its "
                "configuration is computed again",
                DamagedEntryWarning,
                stacklevel=3,
            )
            return None
        return outputs

    def put(self, config: Config, outputs: Sequence) -> None:
        outputs = list(outputs)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            with atomic_path(self.directory / _file_name(config)) as tmp:
                tmp.write_text(json.dumps(outputs))
        self._memory[config] = outputs

    def missing(self, configs: Sequence[Config]) -> list[Config]:
        """The configurations with no readable entry (a damaged one is set aside, see the class)."""
        return [c for c in configs if self.get(c) is None]

    def share(self, everything: Sequence[Config]) -> list[Config]:
        """The configurations of the sweep's WHOLE list ``everything`` that this process computes:
        those missing from the cache, and under torchrun only those it owns (``shards.my_share``
        of the whole list, so that a late process cannot shift its share onto configurations
        another one skipped); the other processes write theirs to the same folder."""
        if shards.world_size() == 1:
            return self.missing(everything)
        if self.directory is None:
            raise ValueError(
                "a sweep split over several processes (WORLD_SIZE > 1) needs a cache_dir, "
                "through which the processes share their outputs"
            )
        shards.cap_threads()
        return self.missing(shards.my_share(everything))

    def working(self) -> contextlib.AbstractContextManager:
        """Around computing this process's share: under torchrun, its status in the cache folder
        (``shards.working``), so the others stop with its error instead of waiting if it fails."""
        return shards.working(self.directory, f"its share of the sweep {getattr(self.directory, 'name', '')}")

    def wait_for(self, everything: Sequence[Config]) -> None:
        """Under torchrun, block until every process has written its share of ``everything`` (the
        same whole list given to ``share``); raise ``shards.RankFailed`` as soon as a process
        failed, died, or finished without writing a configuration it owns."""
        if shards.world_size() == 1:
            return
        log = shards.RankLog(self.directory)

        def check() -> None:
            finished = {r for r, s in log.check_others().items() if s["state"] == "finished"}
            missing = set(self.missing(everything))
            lost = [(i, c) for i, c in enumerate(everything) if shards.owner(i) in finished and c in missing]
            if lost:
                raise shards.RankFailed(
                    f"rank {shards.owner(lost[0][0])} finished without writing {len(lost)} "
                    f"configuration(s) it owns, e.g. {lost[0][1]}, in {self.directory}. "
                    "Do all processes run the same code and WORLD_SIZE? Rerun the same command."
                )

        shards.wait_until(
            lambda: len(everything) - len(self.missing(everything)),
            len(everything),
            f"the other ranks' configurations in {self.directory.name}",
            check,
        )


def stale_sweeps(model_folder: Path) -> list[Path]:
    """Sweep folders of a model written by older code (their digest prefix differs)."""
    root = model_folder / "sweeps"
    if not root.exists():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(code_digest() + "-"))
