"""Can this machine run the lab? A check in under a minute, before class, that says what to do.

    python3 helpers/book/running/laptop.py            # make check-laptop

It runs as a plain script with the system's Python, so it works before setup and imports nothing
of ``helpers``: the environment's packages are tried in a subprocess of ``.venv/bin/python``.
Each line is ``ok``, ``TODO`` (a step of the guide not yet taken, such as ``make setup``),
``WARN`` (the lab runs; something it does not need is missing, or it will be slow) or ``FAILED``
(the lab cannot run), with what to do. Exits 1 on a FAILED line.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_PYPROJECT = (REPO / "pyproject.toml").read_text()
PYTHON_FLOOR = tuple(int(n) for n in re.search(r'requires-python = ">=([\d.]+)', _PYPROJECT).group(1).split("."))
TORCH = re.search(r'"torch==([\d.]+)"', _PYPROJECT).group(1)
FREE_GB = {"FAILED": 3, "WARN": 8}  # the environment (~4 GB) and the lab's models and caches
MEMORY_GB = 8  # the lab's largest chapter peaks well under it

# (name, code run in the environment, what it is for, level when it fails, what to do)
_PACKAGES = [
    (
        "torch",
        f"import torch; assert torch.__version__.startswith('{TORCH}'), torch.__version__; "
        "print(torch.__version__, 'CUDA' if torch.version.cuda else 'CPU')",
        "every chapter",
        "FAILED",
        f"run `make setup`: it installs torch {TORCH}'s CPU build first",
    ),
    (
        "transformers",
        "import transformers; print(transformers.__version__)",
        "every chapter",
        "FAILED",
        "run `make setup`",
    ),
    (
        "fairseq",
        "from helpers.base.fairseq_compat import import_fairseq; print(import_fairseq().__version__)",
        "the translation model (chapters 02 to 10)",
        "FAILED",
        "run `make fairseq PIP='.venv/bin/python -m pip'`",
    ),
    (
        "llama.cpp",
        "import xllamacpp; print('loads')",
        "chapters 13 and 14b only (not the lab plan)",
        "WARN",
        "the lab runs without it; for 13 and 14b, reinstall `xllamacpp` or use a machine it loads on",
    ),
    (
        "jupyter-book",
        "import jupyter_book; print(jupyter_book.__version__)",
        "building the pages",
        "FAILED",
        "run `make setup`",
    ),
]


def _line(level: str, what: str, found: str, todo: str = "") -> tuple[str, str, str, str]:
    return level, what, found, todo


def check_python(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> tuple:
    found = ".".join(map(str, version))
    if version[:2] != (3, 11) or version < PYTHON_FLOOR:
        floor = ".".join(map(str, PYTHON_FLOOR))
        return _line("FAILED", "Python", found, f"install Python {floor} or a later 3.11, then `make setup`")
    return _line("ok", "Python", found)


def check_environment(venv: Path) -> list[tuple]:
    python = venv / "bin" / "python"
    if not python.exists():
        return [_line("TODO", "environment", f"no {python} yet", "run `make setup` (needs PyPI; about 10 minutes)")]
    lines = []
    for name, code, needed_by, level, todo in _PACKAGES:
        try:
            done = subprocess.run([str(python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
            ok, out = done.returncode == 0, (done.stdout.strip() or done.stderr.strip().splitlines()[-1:] or [""])
        except subprocess.TimeoutExpired:
            ok, out = False, "did not answer in 120 s"
        found = out if isinstance(out, str) else out[0]
        lines.append(_line("ok", name, found) if ok else _line(level, f"{name} ({needed_by})", found[:120], todo))
    return lines


def check_disk(path: Path = REPO) -> tuple:
    free = shutil.disk_usage(path).free / 1e9
    for level, floor in FREE_GB.items():
        if free < floor:
            return _line(level, "free disk", f"{free:.1f} GB", f"free at least {FREE_GB['WARN']} GB under {path}")
    return _line("ok", "free disk", f"{free:.1f} GB")


def check_machine() -> list[tuple]:
    cores = os.cpu_count() or 1
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30 if hasattr(os, "sysconf") else 0
    lines = [_line("ok", "CPU cores", str(cores))]
    if memory and memory < MEMORY_GB:
        lines.append(_line("WARN", "memory", f"{memory:.0f} GiB", "close other programs; a chapter may swap"))
    else:
        lines.append(_line("ok", "memory", f"{memory:.0f} GiB"))
    return lines


_BUILT = (
    "from helpers.book.course.bundle import profile_folders; from helpers.book.profiles.profile import load_profile; "
    "from helpers.zoo.model_cache import is_built; f = profile_folders(load_profile('{profile}')).values(); "
    "print(sum(map(is_built, f)), len(f))"
)


def check_models(venv: Path, profile: str) -> tuple:
    """Whether the profile's trained models are in this clone's cache (asked of the environment)."""
    python = venv / "bin" / "python"
    code = _BUILT.format(profile=profile)
    done = (
        subprocess.run([str(python), "-c", code], cwd=REPO, capture_output=True, text=True)
        if python.exists()
        else None
    )
    if done is None or done.returncode:
        return _line("WARN", "trained models", "cannot tell without the environment")
    built, total = map(int, done.stdout.split())
    if built == total:
        return _line("ok", "trained models", f"all {total} of {profile!r} in the cache")
    return _line(
        "WARN",
        "trained models",
        f"{built} of {total} of {profile!r} in the cache",
        f"import the teacher's file (`.venv/bin/python -m helpers.book.course.bundle import <file>`) "
        f"or train them: `make models PROFILE={profile}`",
    )


def report(lines: list[tuple]) -> str:
    width = max(len(what) for _, what, _, _ in lines)
    return "\n".join(
        f"{level:6}  {what:{width}}  {found}" + (f"\n{'':6}  {'':{width}}  -> {todo}" if todo else "")
        for level, what, found, todo in lines
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, default=REPO / ".venv")
    parser.add_argument("--profile", default="lab")
    args = parser.parse_args(argv)
    lines = [check_python(), *check_environment(args.venv), check_disk(), *check_machine()]
    lines.append(check_models(args.venv, args.profile))
    print(report(lines))
    print("\n" + verdict(lines))
    return 1 if any(level == "FAILED" for level, *_ in lines) else 0


def verdict(lines: list[tuple]) -> str:
    """The check's last line: whether the lab runs here, and what is left to fix or do."""
    failed = [what for level, what, _, _ in lines if level == "FAILED"]
    todo = [what for level, what, _, _ in lines if level == "TODO"]
    if failed:
        return "this machine cannot run the lab: fix " + ", ".join(failed)
    if todo:
        return "this machine can run the lab once you do the TODO above: " + ", ".join(todo)
    return "this machine can run the lab"


if __name__ == "__main__":
    sys.exit(main())
