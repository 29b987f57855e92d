"""Shared fixtures; the test session's own folders; the fast and the slow tier.

Tests never write into the repository's ``results/`` or ``.cache/``: the session points the
results, the model cache and the converted models at a temporary folder of its own (removed at
the end), unless they are set already. ``SIXTEEN_HEADS_CHECK_PROFILE`` (tests/test_results_add_up.py)
checks another profile's results where the chapters wrote them, so it keeps the results root.

Tiers: a test that builds or runs the smoke book (its fixtures below), or that is marked
``slow``, is in the slow tier; ``pytest -m "not slow"`` runs the fast unit tier alone.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parent.parent
SESSION_ROOT = Path(tempfile.mkdtemp(prefix="sixteen-heads-tests-"))
_ROOTS = {"SIXTEEN_HEADS_CACHE": "cache", "SIXTEEN_HEADS_CONVERTED": "converted"}
if os.environ.get("SIXTEEN_HEADS_CHECK_PROFILE", "smoke") == "smoke":
    _ROOTS["SIXTEEN_HEADS_RESULTS"] = "results"
for _name, _folder in _ROOTS.items():
    os.environ.setdefault(_name, str(SESSION_ROOT / _folder))

from helpers.base.denormals import flush_denormals  # noqa: E402

flush_denormals()  # the test process computes as the book's kernels do (set before torch starts threads)


def repository_state() -> str:
    """``git status`` of the repository, ignored files included, with this session's own
    by-products left out: bytecode, pytest's cache, and the browser test's screenshots, which it
    writes under ``_build/screenshots/`` beside the built book on purpose, for a person to look at."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return "\n".join(
        line
        for line in sorted(out.splitlines())
        if "__pycache__" not in line
        and ".pytest_cache" not in line
        and not line.endswith(".pyc")
        and "_build/screenshots/" not in line
    )


STATE_AT_START = repository_state()

import pytest

# the smoke models and book, and the paper profile's stand-in run (tests/test_paper_profile.py)
SLOW_FIXTURES = {"smoke_cache", "smoke", "smoke_executed", "smoke_book", "standin_run"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SESSION_ROOT, ignore_errors=True)


@pytest.fixture(scope="session")
def smoke_cache(tmp_path_factory):
    """A temporary model cache with every smoke-profile model, built once per session."""
    from helpers.book import course
    from helpers.book.profiles import load_profile

    path = tmp_path_factory.mktemp("smoke-models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIXTEEN_HEADS_CACHE", str(path))
        course.build(load_profile("smoke"), progress=False)
    return path


@pytest.fixture
def smoke(smoke_cache, monkeypatch):
    """The smoke profile, its models read from ``smoke_cache`` during this test only."""
    from helpers.book.profiles import load_profile

    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(smoke_cache))
    return load_profile("smoke")


@pytest.fixture(scope="session")
def smoke_executed(tmp_path_factory) -> dict:
    """Every notebook executed once on the smoke profile, in book order, as the runner does it:
    name -> executed path, or the ``NotebookFailed`` it raised. Shared by the notebook tests and
    the book build, so no notebook runs twice."""
    from helpers.book import course
    from helpers.book.running import runner

    profile = runner.load_profile("smoke")
    course.build(profile, progress=False)  # as `make book` does first; writes models.json, which the costs page reads
    models = course.models_key(profile)
    folder = tmp_path_factory.mktemp("smoke-executed")
    out = {}
    for name in profile.notebooks:
        try:
            out[name] = runner.run_notebook(
                name, runner.parameters_for(profile, name, {}), output_dir=folder, models=models
            )[0]
        except runner.NotebookFailed as err:
            out[name] = err
    return out


@pytest.fixture(scope="session")
def smoke_book(smoke_executed, tmp_path_factory) -> Path:
    """The book built in strict mode (as ``make book`` does) from the smoke notebooks; returns
    its HTML folder."""
    failed = {n: str(e) for n, e in smoke_executed.items() if isinstance(e, Exception)}
    if failed:
        pytest.fail(f"smoke notebooks failed, so there is no book to test: {failed}")
    return build_book(dict(smoke_executed), tmp_path_factory.mktemp("smoke-book"))


def build_book(executed: dict, source: Path) -> Path:
    """Build the book in strict mode, as ``make pages`` does, in ``source`` from the executed
    notebooks ``executed`` (name -> path, all in one folder with its ``data/``); returns its HTML
    folder."""
    import shutil
    import subprocess

    root = Path(__file__).resolve().parent.parent
    source.mkdir(parents=True, exist_ok=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(root / name, source / name)
    shutil.copytree(root / "book", source / "book", ignore=shutil.ignore_patterns("executed", "*.running.ipynb"))
    for shown in ("helpers", "profiles"):  # the pages show the library's code and the worked profiles (literalinclude)
        (source / shown).symlink_to(root / shown)
    (source / "book" / "executed").mkdir()
    for path in executed.values():
        shutil.copy(path, source / "book" / "executed" / path.name)
    data = next(iter(executed.values())).parent / "data"  # the CSV tables the chapters link
    if data.exists():
        shutil.copytree(data, source / "book" / "executed" / "data")
    build = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", str(source), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, f"strict book build failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    return source / "_build" / "html"
