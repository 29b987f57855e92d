"""Make the teaching guide's key on a profile (a class's: the lab):

    python -m helpers.book.running.teacher_key --profile lab        # make teacher-key

Every exercise that asks for a prediction (``chapters/ch17_teaching_guide.PREDICTIONS``) is run
with its override as a run of its own, under ``results/<profile>-key/<exercise>/`` (its notebook,
and its tables, which start as a copy of the profile's), so the book's pages and tables stay as
they were. The answers, read from those runs and the profile's own tables, are saved as the table
``17_teacher_key``, and the guide runs again to show it, folded. Run it after the profile's book:
the answers compare each run with the profile's own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from ..chapters.ch17_teaching_guide import KEY_TABLE, PREDICTIONS, key_table
from ..store.results import ENV, results_dir, results_root, save_table
from . import runner
from .reads import changed

GUIDE = "17_teaching_guide"  # the page that shows the key


def runs_folder(profile: str) -> Path:
    return results_root() / f"{profile}-key"


@contextlib.contextmanager
def _results_at(root: Path) -> Iterator[None]:
    """``$SIXTEEN_HEADS_RESULTS`` set to ``root`` inside the block, as it was after it."""
    before = os.environ.get(ENV)
    os.environ[ENV] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV)
        else:
            os.environ[ENV] = before


def _read_the_same(out: Path, profile: str, chapter: str, root: Path) -> bool:
    """Whether the run in ``out`` saved ``chapter``'s tables and read, of what other chapters
    wrote, what is under ``root/<profile>`` now (byte for byte)."""
    executed = out / f"{chapter}.ipynb"
    if not runner.chapter_tables(out / "results" / profile, chapter) or not executed.is_file():
        return False
    reads = json.loads(executed.read_text())["metadata"].get("sixteen_heads", {}).get("reads", {})
    own = runner.chapter_prefix(chapter)  # its tables and its parameters file are its own
    return not changed({rel: d for rel, d in reads.items() if not Path(rel).name.startswith(own)}, root)


def run_prediction(profile: str, chapter: str, override: str, out: Path) -> int:
    """``chapter`` with ``override``, its notebook in ``out`` and its tables in ``out/results``
    (made first as a copy of the profile's); the runner's exit code. A run that finished before on
    the profile's tables as they are now is kept, so an interrupted key resumes where it stopped."""
    source, tables = results_dir(profile), out / "results"
    with _results_at(tables):
        if _read_the_same(out, profile, chapter, source.parent) and runner.is_current(
            profile, chapter, [override], out
        ):
            print(f"{out.name}: kept, it ran before on the same tables")
            return 0
        shutil.rmtree(tables / profile, ignore_errors=True)  # a copy of the profile's tables as they are now
        runner.copy_tables(source, tables / profile)
        for own in runner.chapter_tables(tables / profile, chapter):  # never the profile's, read as the run's
            own.unlink()
        return runner.main(["--profile", profile, "--only", chapter, "-p", override, "--output-dir", str(out)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="lab")
    args = parser.parse_args(argv)
    folder = runs_folder(args.profile)
    codes = {p.slug: run_prediction(args.profile, p.chapter, p.override, folder / p.slug) for p in PREDICTIONS}
    failed = frozenset(slug for slug, code in codes.items() if code)
    key = save_table(key_table(results_dir(args.profile), folder, failed), args.profile, KEY_TABLE)
    print(key.to_string(index=False))
    shown = runner.main(["--profile", args.profile, "--only", GUIDE, "--force"])  # the guide shows it
    print(f"next: make pages PROFILE={args.profile}")
    return 1 if failed or shown else 0


if __name__ == "__main__":
    sys.exit(main())
