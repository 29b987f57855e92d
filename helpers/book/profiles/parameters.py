"""A chapter's parameters, as its ``parameters`` cell declares them, and the check of ``-p``
overrides against them before anything runs (papermill itself only prints "Passed unknown
parameter" and runs on, so a typo would silently change nothing)."""

from __future__ import annotations

import ast
import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

# what a value must be to replace a default of this type; int and float are also accepted for a float
_KINDS = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a string",
    list: "a list, e.g. [1, 2]",
    dict: "a mapping, e.g. {a: 1}",
}


def declared_parameters(source: Path) -> dict[str, Any]:
    """``{name: default}`` of the ``parameters`` cell of the notebook at ``source`` (each line
    ``name = literal``; a default that is not a literal is ``None``: any value is accepted). Read
    once per version of the file: the runner checks the profile and then gives each chapter its
    parameters from the same cells."""
    source = Path(source)
    return copy.deepcopy(dict(_declared(str(source), source.stat().st_mtime_ns)))  # a list default stays the cache's


@functools.lru_cache(maxsize=64)
def _declared(source: str, mtime_ns: int) -> tuple[tuple[str, Any], ...]:
    import papermill as pm

    out = {}
    for name, spec in pm.inspect_notebook(source).items():
        try:
            out[name] = ast.literal_eval(spec["default"])
        except (ValueError, SyntaxError):
            out[name] = None
    return tuple(out.items())


def _coerce(name: str, value: Any, default: Any, notebook: str) -> Any:
    """``value`` as the type of ``default``, or a ``SystemExit`` that names the type expected."""
    if default is None or value is None:
        return value
    kind = type(default)
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    raise SystemExit(
        f"parameter {name}={value!r} does not fit chapter {notebook}: it takes {_KINDS.get(kind, kind.__name__)} "
        f"(its default is {default!r}); pass e.g. -p {name}={default!r}"
    )


# counts that must be at least 1 (elsewhere a whole-number parameter counts something, or is 0
# for "all of them", and must be at least 0)
_AT_LEAST_ONE = frozenset(
    {
        "batch_size",
        "beam",
        "n_resamples",
        "repeats",
        "configs_per_pass",
        "n_pairs",
        "max_words",
        "examples_per_split",
        "timed_verses",
        "report_verses",
        "select_verses",
    }
)


def range_problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` for parameter ``name`` (already of its default's type), or
    None: an alpha outside (0, 1), a margin that is not positive, a share outside [0, 1], a step
    outside (0, 1], a negative count (or a count below 1 where 0 means nothing: ``_AT_LEAST_ONE``),
    a list of batch sizes or epochs with an entry below 1."""
    if isinstance(value, bool) or value is None:
        return None
    if name == "margins":
        return (
            None
            if isinstance(value, dict)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in value.values())
            else "a mapping of score to a positive margin, e.g. {BLEU: 1.0, accuracy: 0.01, perplexity: 0.01}"
        )
    if name == "alpha":
        return None if 0 < value < 1 else "a significance level, strictly between 0 and 1"
    if name == "bleu":
        from ...heads.metrics import BLEU_TOKENIZERS

        return None if value in BLEU_TOKENIZERS else f"a BLEU definition, one of {sorted(BLEU_TOKENIZERS)}"
    if name == "max_len_a":
        return None if value >= 0 else "a multiple of the source length, 0 or more"
    if name == "step":
        return None if 0 < value <= 1 else "a share of the heads pruned per step, above 0 and at most 1"
    if name.endswith("share") and isinstance(value, (int, float)):
        return None if 0 <= value <= 1 else "a share, between 0 and 1"
    if isinstance(value, int):
        low = 1 if name in _AT_LEAST_ONE else 0
        return None if value >= low else f"a count, a whole number >= {low}"
    if isinstance(value, list) and (name.endswith("batch_sizes") or name.endswith("epochs")):
        return (
            None
            if all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
            else "a list of whole numbers >= 1"
        )
    return None


def _check_range(name: str, value: Any, default: Any, where: str) -> Any:
    """``value``, or a ``SystemExit`` that names the parameter, ``where`` it was given and the range."""
    problem = range_problem(name, value)
    if problem:
        raise SystemExit(
            f"parameter {name}={value!r} is out of range ({where}): it takes {problem} (its default is {default!r})"
        )
    return value


def checked_overrides(sources: Mapping[str, Path], overrides: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{notebook: overrides it declares}`` for the chapters ``sources`` (name -> notebook path),
    each value cast to its default's type. An override that no chapter declares, or whose value
    cannot take the type, raises ``SystemExit`` with the parameters the chapters do have."""
    declared = {notebook: declared_parameters(path) for notebook, path in sources.items()}
    unknown = [name for name in overrides if not any(name in params for params in declared.values())]
    if unknown:
        listing = "; ".join(
            f"{nb}: {', '.join(p for p in params if p != 'profile')}" for nb, params in declared.items()
        )
        raise SystemExit(
            f"unknown parameter {', '.join(map(repr, unknown))}: "
            f"{'no chapter run here declares it' if len(declared) > 1 else 'the chapter does not declare it'}. "
            f"Parameters: {listing}"
        )
    return {
        notebook: {
            name: _check_range(
                name,
                _coerce(name, value, params[name], notebook),
                params[name],
                f"-p {name}=... for chapter {notebook}",
            )
            for name, value in overrides.items()
            if name in params
        }
        for notebook, params in declared.items()
    }


_PROFILE_KEYS = frozenset({"description", "defaults", "notebooks", "models"})


def check_profile(profile: Mapping[str, Any], path: Path, sources: Mapping[str, Path]) -> None:
    """Refuse, naming the key and the file, a profile with an unknown top-level key (anchors such
    as ``*_recipe`` aside), a section of the wrong shape, a chapter that is not a notebook of
    ``sources``, or a parameter that no chapter declares or whose value has the wrong type or is
    out of range."""
    check_shape(profile, path)
    chapters = profile.get("notebooks") or {}
    missing = [n for n in chapters if n not in sources]
    if missing:
        raise SystemExit(f"{path}: notebooks: {missing} is not a chapter; the chapters are {sorted(sources)}")
    declared = {n: declared_parameters(sources[n]) for n in chapters}
    for name, value in (profile.get("defaults") or {}).items():
        having = [n for n, params in declared.items() if name in params]
        if not having:
            raise SystemExit(f"{path}: defaults: {name} is a parameter of no chapter")
        for n in having:
            _check_value(path, f"defaults: {name}", name=name, value=value, default=declared[n][name], chapter=n)
    for chapter, params in chapters.items():
        for name, value in (params or {}).items():
            if name not in declared[chapter]:
                raise SystemExit(
                    f"{path}: notebooks: {chapter}: {name} is not a parameter of that chapter; it has "
                    f"{', '.join(p for p in declared[chapter] if p != 'profile')}"
                )
            _check_value(
                path,
                f"notebooks: {chapter}: {name}",
                name=name,
                value=value,
                default=declared[chapter][name],
                chapter=chapter,
            )


def check_shape(profile: Mapping[str, Any], path: Path) -> None:
    """Refuse, naming the file, an unknown top-level key (anchors such as ``*_recipe`` aside) or a
    section of the wrong shape (``_check_sections``): what can be checked of one file alone."""
    unknown = [k for k in profile if k not in _PROFILE_KEYS and not str(k).endswith("_recipe")]
    if unknown:
        raise SystemExit(f"{path}: unknown key(s) {unknown}; a profile has {sorted(_PROFILE_KEYS)}")
    _check_sections(profile, path)


def _check_sections(profile: Mapping[str, Any], path: Path) -> None:
    """``description`` is a string; ``defaults`` a mapping; ``notebooks`` and ``models`` map a
    name to a mapping (or to nothing, for a chapter with no parameters of its own)."""
    if not isinstance(profile.get("description") or "", str):
        raise SystemExit(f"{path}: description: a line of text, not {profile['description']!r}")
    for key in ("defaults", "notebooks", "models"):
        section = profile.get(key) or {}
        if not isinstance(section, Mapping):
            raise SystemExit(f"{path}: {key}: a mapping of name: value, not {type(section).__name__}")
        if key == "defaults":
            continue
        for name, entry in section.items():
            if entry is not None and not isinstance(entry, Mapping):
                raise SystemExit(f"{path}: {key}: {name}: a mapping of settings, not {entry!r}")


def _check_value(path: Path, key: str, *, name: str, value: Any, default: Any, chapter: str) -> None:
    try:
        value = _coerce(name, value, default, chapter)
    except SystemExit as err:
        raise SystemExit(f"{path}: {key}: {err}") from None
    _check_range(name, value, default, f"{path}: {key}")


def from_parameters(kind: type, parameters: Mapping[str, Any], **given: Any):
    """A ``kind`` (a dataclass) built from a chapter's parameters cell: each field from ``given``
    if there, else from ``parameters`` (the chapter's ``globals()``, where papermill's values
    are) by the field's own name, so that a chapter writes ``plan = from_parameters(mb.Plan,
    globals())`` for what would be ten lines of ``budgets=budgets``. No default fills in: a
    field found in neither is a ``TypeError`` that names it, so the object holds what the
    parameters cell shows and nothing else. Fields that ``__init__`` does not take, or whose
    names start with ``_``, are left to the class."""
    import dataclasses

    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        raise TypeError(f"from_parameters builds a dataclass from a chapter's parameters, not {kind!r}")
    names = [f.name for f in dataclasses.fields(kind) if f.init and not f.name.startswith("_")]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"{kind.__name__} has no field {', '.join(unknown)}; its fields: {', '.join(names)}")
    missing = [name for name in names if name not in given and name not in parameters]
    if missing:
        raise TypeError(
            f"{kind.__name__} takes {', '.join(missing)} from the chapter's parameters, which declare no such "
            f"name: add {missing[0]} to the parameters cell, or pass it: "
            f"from_parameters({kind.__name__}, globals(), {missing[0]}=...)"
        )
    return kind(**{name: given[name] if name in given else parameters[name] for name in names})


def parameter_meanings(source: str) -> dict[str, str]:
    """``{name: meaning}`` of a parameters cell's ``source``: each assignment's comment, beside it
    on its last line or, where it did not fit there, in the comment lines just above it (the
    cell's first line, which says what the cell is, excepted). Papermill reads only the first."""
    import ast
    import io
    import tokenize

    lines = source.splitlines()
    trailing = {
        token.start[0] - 1: token.string.lstrip("#").strip()
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and lines[token.start[0] - 1].strip() != token.string.strip()
    }
    meanings = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        above, i = [], node.lineno - 2
        while i >= 0 and lines[i].startswith("#") and "papermill injects" not in lines[i]:
            above.insert(0, lines[i].lstrip("#").strip())
            i -= 1
        meanings[node.targets[0].id] = trailing.get(node.end_lineno - 1) or " ".join(above)
    return meanings


def parameter_table(profiles: Mapping[str, Any], chapters: list[str], notebooks: Path):
    """One row per parameter of each chapter in ``chapters`` (the notebooks in folder ``notebooks``):
    its default and meaning from the parameters cell, then each profile's value (``profiles``: name ->
    ``Profile``; its defaults and the chapter's entry), or "·" where the profile sets none."""
    import nbformat
    import pandas as pd
    import papermill as pm

    rows = []
    for chapter in chapters:
        path = notebooks / f"{chapter}.ipynb"
        cell = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
        meanings = parameter_meanings(cell.source)
        for name, spec in pm.inspect_notebook(str(path)).items():
            if name == "profile":
                continue
            row = {
                "chapter": chapter,
                "parameter": name,
                "notebook default": spec["default"],
                "meaning": meanings[name],
            }
            for profile, settings in profiles.items():
                given = {**settings.defaults, **settings.notebooks.get(chapter, {})}
                row[profile] = repr(given[name]) if name in given else "·"
            rows.append(row)
    return pd.DataFrame(rows)


def parse_overrides(items: list[str]) -> dict:
    """``["seed=3", "model=bert-base-uncased"]`` -> dict; values are parsed as YAML scalars. A
    name given twice is refused (which of the two was meant?)."""
    out: dict = {}
    given: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"parameter override {item!r} must look like name=value")
        if key in out:
            raise SystemExit(f"parameter {key} is given twice (-p {given[key]} and -p {item}): give it once")
        out[key], given[key] = yaml.safe_load(value), item
    return out
