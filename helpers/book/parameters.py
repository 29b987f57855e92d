"""A chapter's parameters, as its ``parameters`` cell declares them, and the check of ``-p``
overrides against them before anything runs (papermill itself only prints "Passed unknown
parameter" and runs on, so a typo would silently change nothing)."""
from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# what a value must be to replace a default of this type; int and float are also accepted for a float
_KINDS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string",
          list: "a list, e.g. [1, 2]", dict: "a mapping, e.g. {a: 1}"}


def declared_parameters(source: Path) -> dict[str, Any]:
    """``{name: default}`` of the ``parameters`` cell of the notebook at ``source`` (each line
    ``name = literal``; a default that is not a literal is ``None``: any value is accepted)."""
    import papermill as pm

    out = {}
    for name, spec in pm.inspect_notebook(str(source)).items():
        try:
            out[name] = ast.literal_eval(spec["default"])
        except (ValueError, SyntaxError):
            out[name] = None
    return out


def coerce(name: str, value: Any, default: Any, notebook: str) -> Any:
    """``value`` as the type of ``default``, or a ``SystemExit`` that names the type expected."""
    if default is None or value is None:
        return value
    kind = type(default)
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    raise SystemExit(f"parameter {name}={value!r} does not fit chapter {notebook}: it takes {_KINDS.get(kind, kind.__name__)} "
                     f"(its default is {default!r}); pass e.g. -p {name}={default!r}")


def checked_overrides(sources: Mapping[str, Path], overrides: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{notebook: overrides it declares}`` for the chapters ``sources`` (name -> notebook path),
    each value cast to its default's type. An override that no chapter declares, or whose value
    cannot take the type, raises ``SystemExit`` with the parameters the chapters do have."""
    declared = {notebook: declared_parameters(path) for notebook, path in sources.items()}
    unknown = [name for name in overrides if not any(name in params for params in declared.values())]
    if unknown:
        listing = "; ".join(f"{nb}: {', '.join(p for p in params if p != 'profile')}" for nb, params in declared.items())
        raise SystemExit(f"unknown parameter {', '.join(map(repr, unknown))}: "
                         f"{'no chapter run here declares it' if len(declared) > 1 else 'the chapter does not declare it'}. "
                         f"Parameters: {listing}")
    return {notebook: {name: coerce(name, value, params[name], notebook)
                       for name, value in overrides.items() if name in params}
            for notebook, params in declared.items()}



def check_runner_command(command: str) -> tuple[str, dict[str, Any]]:
    """``(chapter, checked overrides)`` of a runner command line as the README and the teaching
    guide print it (``... helpers.book.runner --profile P --only CHAPTER -p name=value ...``);
    ``SystemExit`` as ``checked_overrides`` when an override does not fit the chapter."""
    import shlex

    from ..zoo.locations import REPO
    from .profiles import parse_overrides

    words = shlex.split(command)
    chapter = words[words.index("--only") + 1]
    overrides = parse_overrides([words[i + 1] for i, w in enumerate(words) if w == "-p"])
    return chapter, checked_overrides({chapter: REPO / "notebooks" / f"{chapter}.ipynb"}, overrides)[chapter]
