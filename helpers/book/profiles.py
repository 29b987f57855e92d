"""Profiles: ``profiles/<name>.yml`` holds ``defaults`` (parameters of every notebook),
``notebooks`` (per-notebook parameters, in book order) and ``models`` (what ``course`` builds).
"""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from ..zoo.locations import REPO

PROFILES = REPO / "profiles"


def profile_folders() -> list[Path]:
    """Where profiles are looked up: ``$SIXTEEN_HEADS_PROFILES`` (if set) first, then ``profiles/``."""
    extra = os.environ.get("SIXTEEN_HEADS_PROFILES")
    return ([Path(extra)] if extra else []) + [PROFILES]


def profile_path(name: str) -> Path | None:
    """The file of profile ``name`` (``profile_folders()`` in order), or None."""
    return next((f / f"{name}.yml" for f in profile_folders() if (f / f"{name}.yml").exists()), None)


def load_profile(name: str) -> dict:
    path = profile_path(name)
    if path is None:
        known = sorted({p.stem for f in profile_folders() for p in f.glob("*.yml")})
        raise SystemExit(f"unknown profile {name!r}: profiles are {known} (files in {', '.join(map(str, profile_folders()))})")
    profile = yaml.safe_load(path.read_text())
    profile["name"] = name
    profile.setdefault("defaults", {})
    profile.setdefault("notebooks", {})
    return profile


def parameters_for(profile: dict, notebook: str, overrides: dict) -> dict:
    """The parameters chapter ``notebook`` runs with: the profile's ``defaults`` that its
    parameters cell declares (a default set once serves every chapter that has the parameter),
    then its own entry in ``notebooks``, then ``overrides``, and ``profile``."""
    from .parameters import declared_parameters

    source = REPO / "notebooks" / f"{notebook}.ipynb"
    declared = declared_parameters(source) if source.exists() else None
    defaults = {k: v for k, v in profile["defaults"].items() if declared is None or k in declared}
    params = {**defaults, **(profile["notebooks"].get(notebook) or {}), **overrides}
    params["profile"] = profile["name"]
    return params
