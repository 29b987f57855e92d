"""A profile: ``profiles/<name>.yml`` holds ``description``, ``defaults`` (parameters of every
chapter that declares them), ``notebooks`` (per-chapter parameters, in book order) and
``models`` (what ``helpers.book.course`` builds). ``load_profile`` reads it into a ``Profile``
and checks it against the chapters' parameters cells before anything runs.

A profile may start from another one with ``extends: <name>`` and then say only what changes
(``extended``): its description replaces the other's, its defaults and each chapter's
parameters are added to the other's, and each model's spec is merged key by key (a nested
mapping merged too, a list or a value replaced). Profiles can extend profiles that extend others.

A profile's *name* is ``profile`` everywhere (a string: the papermill parameter, the results
folder); the loaded ``Profile`` is ``settings`` everywhere (the chapters and the library).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...zoo.locations import REPO
from .parameters import check_profile, check_shape, checked_overrides, declared_parameters, parse_overrides

PROFILES = REPO / "profiles"
NOTEBOOKS = REPO / "notebooks"


@dataclass(frozen=True)
class Profile:
    """A loaded, checked profile. ``models`` maps a model's name to its spec (the course builds
    those with a ``task``); ``notebooks`` maps each chapter, in book order, to its parameters."""

    name: str
    path: Path | None = None
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    notebooks: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)

    def model(self, name: str) -> dict[str, Any]:
        """The spec of model ``name``, or a ``KeyError`` that names the models the profile has."""
        if name not in self.models:
            raise KeyError(f"profile {self.name!r} has no model {name!r}; it has {sorted(self.models)}")
        return self.models[name]

    def max_length(self, name: str) -> int:
        """The token limit classifier ``name`` was fine-tuned with (its ``fine_tune.max_length``)."""
        return self.model(name)["fine_tune"]["max_length"]

    @classmethod
    def from_mapping(cls, name: str, raw: dict[str, Any], path: Path | None = None) -> Profile:
        """A ``Profile`` of a YAML mapping (top-level ``*_recipe`` keys are YAML anchors, dropped);
        ``None`` sections are empty."""
        return cls(
            name=name,
            path=path,
            description=raw.get("description") or "",
            defaults=dict(raw.get("defaults") or {}),
            notebooks={chapter: dict(params or {}) for chapter, params in (raw.get("notebooks") or {}).items()},
            models=dict(raw.get("models") or {}),
        )


def profile_folders() -> list[Path]:
    """Where profiles are looked up: ``$SIXTEEN_HEADS_PROFILES`` (if set) first, then ``profiles/``."""
    extra = os.environ.get("SIXTEEN_HEADS_PROFILES")
    return ([Path(extra)] if extra else []) + [PROFILES]


def profile_path(name: str, skip: Path | None = None) -> Path | None:
    """The file of profile ``name`` (``profile_folders()`` in order), passing over ``skip``, or None."""
    files = (f / f"{name}.yml" for f in profile_folders())
    return next((p for p in files if p.exists() and (skip is None or p.resolve() != skip.resolve())), None)


def _known_profiles() -> list[str]:
    return sorted({p.stem for f in profile_folders() for p in f.glob("*.yml")})


def _chapter_sources() -> dict[str, Path]:
    """``{chapter: notebook path}`` of every chapter in ``notebooks/``."""
    return {p.stem: p for p in sorted(NOTEBOOKS.glob("*.ipynb"))}


def load_profile(name: str) -> Profile:
    """Profile ``name``, read and checked: an unknown key, a chapter that does not exist, a
    parameter that no chapter declares, or a value of the wrong type or out of its range is a
    ``SystemExit`` that names the key and the file (``parameters.check_profile``); so is a bad
    ``extends`` (``_read_extended``)."""
    path = profile_path(name)
    if path is None:
        folders = ", ".join(map(str, profile_folders()))
        raise SystemExit(f"unknown profile {name!r}: profiles are {_known_profiles()} (files in {folders})")
    raw = _read_extended(path, ())
    check_profile(raw, path, _chapter_sources())
    return Profile.from_mapping(name, raw, path)


def _read_mapping(path: Path) -> dict[str, Any]:
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise SystemExit(f"{path}: a profile is a mapping with keys extends, description, defaults, notebooks, models")
    return raw


def _read_extended(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """The mapping of the profile at ``path`` with what it ``extends`` merged in (``extended``).
    Each file's keys and sections are checked before any merge, naming that file; ``SystemExit``
    too for a base that is not a profile's name, is unknown, or leads back to ``path``. The base
    is looked up as ``profile_path`` does, skipping ``path`` itself, so that a profile of the
    same name in ``$SIXTEEN_HEADS_PROFILES`` can extend the shipped one."""
    raw = _read_mapping(path)
    base_name = raw.pop("extends", None)
    check_shape(raw, path)
    if base_name is None:
        return raw
    if not isinstance(base_name, str):
        raise SystemExit(f"{path}: extends: the name of another profile, not {base_name!r}")
    base_path = profile_path(base_name, skip=path) or profile_path(base_name)
    if base_path is None:
        raise SystemExit(f"{path}: extends: unknown profile {base_name!r}; profiles are {_known_profiles()}")
    if base_path.resolve() in {p.resolve() for p in (*seen, path)}:
        chain = " -> ".join(p.stem for p in (*seen, path, base_path))
        raise SystemExit(f"{path}: extends: profiles extend one another in a circle ({chain})")
    return extended(_read_extended(base_path, (*seen, path)), raw)


def extended(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Profile mapping ``child`` on top of ``base``, a new mapping (nested values may be shared
    with the arguments, which are not changed): ``defaults`` added to; each chapter's parameters
    in ``notebooks`` added to (a chapter new in ``child`` comes last); each model in ``models``
    merged by ``_merged``; any other key (``description``) ``child``'s where it has one, else
    ``base``'s. A chapter's own parameters still beat the defaults (``parameters_for``), so a
    default the child sets does not reach a chapter whose entry in ``base`` sets that parameter.
    A key cannot be removed, and YAML anchors (``*_recipe``) do not cross files."""
    out = {k: v for k, v in base.items() if k not in ("defaults", "notebooks", "models")}
    out |= {k: v for k, v in child.items() if k not in ("defaults", "notebooks", "models")}
    out["defaults"] = {**(base.get("defaults") or {}), **(child.get("defaults") or {})}
    chapters = dict(base.get("notebooks") or {})
    for chapter, params in (child.get("notebooks") or {}).items():
        chapters[chapter] = {**(chapters.get(chapter) or {}), **(params or {})}
    out["notebooks"] = chapters
    models = dict(base.get("models") or {})
    for name, spec in (child.get("models") or {}).items():
        models[name] = _merged(models.get(name) or {}, spec or {})
    out["models"] = models
    return out


def _merged(base: Any, child: Any) -> Any:
    """``child`` over ``base``: two mappings merged key by key, recursively; else ``child``."""
    if isinstance(base, dict) and isinstance(child, dict):
        return {**base, **{k: _merged(base.get(k), v) for k, v in child.items()}}
    return child


def parameters_for(settings: Profile, notebook: str, overrides: dict) -> dict:
    """The parameters chapter ``notebook`` runs with: the profile's ``defaults`` that its
    parameters cell declares (a default set once serves every chapter that has the parameter),
    then its own entry in ``notebooks``, then ``overrides``, and ``profile`` (the name)."""
    source = NOTEBOOKS / f"{notebook}.ipynb"
    declared = declared_parameters(source) if source.exists() else None
    defaults = {k: v for k, v in settings.defaults.items() if declared is None or k in declared}
    params = {**defaults, **settings.notebooks.get(notebook, {}), **overrides}
    params["profile"] = settings.name
    return params


def chapter_parameters(settings: Profile, notebook: str) -> dict:
    """Every parameter chapter ``notebook`` runs with on ``settings``: its parameters cell's
    defaults, then the profile's values for it (``parameters_for``)."""
    return {**declared_parameters(NOTEBOOKS / f"{notebook}.ipynb"), **parameters_for(settings, notebook, {})}


# chapters that read every model of the profile, whatever their parameters name
READS_EVERY_MODEL = frozenset({"02_course_models"})


def models_read(settings: Profile, notebook: str, overrides: dict | None = None) -> list[str]:
    """The names of ``settings.models`` that chapter ``notebook`` reads with ``overrides``: those
    its parameters name (a value, or an item of a list value, equal to a model's name, e.g.
    ``translation = "iwslt"``), in profile order; every model for ``READS_EVERY_MODEL``. The
    runner checks only these models' downloads, so a chapter is never refused for another's."""
    if notebook in READS_EVERY_MODEL:
        return list(settings.models)
    source = NOTEBOOKS / f"{notebook}.ipynb"
    declared = declared_parameters(source) if source.exists() else {}
    named: set[str] = set()
    for value in {**declared, **parameters_for(settings, notebook, overrides or {})}.values():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and item in settings.models:
                named.add(item)
    return [name for name in settings.models if name in named]


def check_runner_command(command: str) -> tuple[str, dict[str, Any]]:
    """``(chapter, checked overrides)`` of a runner command line as the README and the teaching
    guide print it (``... helpers.book.running.runner --profile P --only CHAPTER -p name=value ...``);
    ``SystemExit`` as ``checked_overrides`` when an override does not fit the chapter."""
    import shlex

    words = shlex.split(command)
    chapter = words[words.index("--only") + 1]
    if "--profile" in words:  # an unknown profile, or one without the chapter, is refused too
        profile = load_profile(words[words.index("--profile") + 1])
        if chapter not in profile.notebooks:
            raise SystemExit(f"profile {profile.name!r} has no chapter {chapter!r}")
    overrides = parse_overrides([words[i + 1] for i, w in enumerate(words) if w == "-p"])
    return chapter, checked_overrides({chapter: REPO / "notebooks" / f"{chapter}.ipynb"}, overrides)[chapter]
