"""A class's runs are kept: a chapter reruns when a table it read changed, a failed chapter does
not stop the others (its page says why), a run of its own keeps its tables beside its notebooks,
and the guide's workflow (rerun one chapter with an override, rebuild the pages) shows the
student's numbers and verdicts on the rebuilt pages."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from helpers.book.running import reads, runner

ROOT = Path(__file__).resolve().parents[1]


def _notebook(folder: Path, name: str, *code: str) -> None:
    cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]})]
    cells += [nbformat.v4.new_code_cell(c) for c in code]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}"), *cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / f"{name}.ipynb")


_STORE = "import pandas as pd\nfrom helpers.book.store.results import results_root, save_table\n"
_READ = _STORE + "pd.read_csv(results_root() / 'p' / 't.csv')"
_WRITE = _STORE + "save_table(pd.DataFrame({'a': [x]}), 'p', 'w')"


@pytest.fixture
def chapters(tmp_path, monkeypatch):
    """Notebooks of our own in a folder the runner reads, a results folder of their own, and one
    table ``p/t.csv`` in it."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    monkeypatch.setattr(runner, "NOTEBOOKS", folder)
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    (tmp_path / "results" / "p").mkdir(parents=True)
    pd.DataFrame({"a": [1, 2]}).to_csv(tmp_path / "results" / "p" / "t.csv", index=False)
    return folder


def test_a_chapter_reruns_when_a_table_it_read_changes(chapters, tmp_path):
    _notebook(chapters, "reader", _READ)
    _notebook(chapters, "writer", _WRITE)
    out = tmp_path / "out"
    table = tmp_path / "results" / "p" / "t.csv"
    runner.run_notebook("reader", {"x": 1}, output_dir=out)
    runner.run_notebook("writer", {"x": 1}, output_dir=out)
    meta = json.loads((out / "reader.ipynb").read_text())["metadata"]["sixteen_heads"]
    assert list(meta["reads"]) == ["p/t.csv"]  # what it read, relative to the results folder
    assert json.loads((out / "writer.ipynb").read_text())["metadata"]["sixteen_heads"]["reads"] == {}
    assert not list(out.glob("*.reads"))
    assert runner.run_notebook("reader", {"x": 1}, output_dir=out)[2]  # nothing changed: reused
    assert runner.stale_readers({"reader": {"x": 1}, "writer": {"x": 1}}, out) == {}
    pd.DataFrame({"a": [1, 3]}).to_csv(table, index=False)
    assert runner.stale_readers({"reader": {"x": 1}, "writer": {"x": 1}}, out) == {"reader": ["p/t.csv"]}
    assert not runner.run_notebook("reader", {"x": 1}, output_dir=out)[2]  # its table changed: run again
    assert runner.run_notebook("reader", {"x": 1}, output_dir=out)[2]
    table.unlink()  # a table that is gone has changed too
    assert reads.changed(meta["reads"]) == ["p/t.csv"]


def test_the_run_logs_are_not_followed():
    for log in ("run_times.csv", "sweep_costs/03.jsonl", "sweep_costs.csv", "models.json"):
        assert not reads._tracked(f"course/{log}"), log
    assert reads._tracked("course/03_one_head_counts.csv") and reads._tracked("course/parameters/03.json")


def test_a_failed_chapter_gets_a_page_that_says_why_and_the_others_still_run(chapters, tmp_path):
    _notebook(chapters, "first", "y = 1")
    _notebook(chapters, "broken", "raise ValueError('no such head: layer 9 of 6; use layers 0 to 5')")
    _notebook(chapters, "last", "z = 1")
    out = tmp_path / "out"
    names = ["first", "broken", "last"]
    failed = runner.run_chapters(names, dict.fromkeys(names, {"x": 1}), profile="p", output_dir=out)
    assert [err.notebook for err in failed] == ["broken"]
    assert json.loads((out / "last.ipynb").read_text())["metadata"]["sixteen_heads"]["status"] == "ok"
    page = nbformat.read(out / "broken.ipynb", as_version=4)
    text = "\n".join(c.source for c in page.cells)
    assert page.cells[0].source.startswith("# broken\n")
    assert "ValueError: no such head: layer 9 of 6; use layers 0 to 5" in text
    assert "--profile p --only broken" in text and "make pages PROFILE=p" in text
    assert "raise ValueError" in text  # the end of the traceback
    assert page.metadata["sixteen_heads"]["status"] == "failed"
    assert not runner._is_current("broken", {"x": 1}, out)  # the next run tries it again
    assert runner._is_current("last", {"x": 1}, out)


def test_a_run_of_its_own_keeps_its_tables_beside_its_notebooks(tmp_path, monkeypatch):
    from helpers.book.store import results

    monkeypatch.delenv("SIXTEEN_HEADS_RESULTS")
    monkeypatch.setattr(results, "ROOT", tmp_path)  # the repository's results/: here tmp_path/results
    (tmp_path / "results" / "lab" / "sweep_costs").mkdir(parents=True)
    (tmp_path / "results" / "lab" / "03_counts.csv").write_text("a\n1\n")
    mine = runner.own_results(tmp_path / "my_runs" / "alpha", "lab")
    assert mine == (tmp_path / "my_runs" / "alpha" / "results" / "lab").resolve()
    assert (mine / "03_counts.csv").read_text() == "a\n1\n"  # the chapters it does not rerun are there to read
    assert not (mine / "sweep_costs").exists()
    from helpers.book.store.results import results_dir

    assert results_dir("lab") == mine  # this process and its chapters write there
    (mine / "03_counts.csv").write_text("a\n2\n")
    monkeypatch.delenv("SIXTEEN_HEADS_RESULTS")
    runner.own_results(tmp_path / "my_runs" / "alpha", "lab")  # a second run into it keeps what is there
    assert (mine / "03_counts.csv").read_text() == "a\n2\n"
    assert (tmp_path / "results" / "lab" / "03_counts.csv").read_text() == "a\n1\n"
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "named"))  # a folder the caller names stands
    assert runner.own_results(tmp_path / "my_runs" / "beta", "lab") is None
    assert results_dir("lab") == tmp_path / "named" / "lab"


def _page_text(path: Path) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", path.read_text())).split())


def test_the_guides_workflow_shows_the_students_run_on_the_rebuilt_pages(smoke_executed, tmp_path, monkeypatch):
    """As the teaching guide says: rerun one chapter with an override (the runner), then rebuild
    the pages (``make pages``). The override is on the chapter's page, and the scorecard, which
    follows the chapter's new tables, judges every claim on them."""
    from conftest import build_book

    from helpers.book.scorecard.compare_builds import compare_verdicts
    from helpers.book.store.results import results_root

    executed = tmp_path / "executed"
    shutil.copytree(next(iter(smoke_executed.values())).parent, executed)
    before = tmp_path / "before"
    shutil.copytree(results_root(), before)
    shutil.copytree(results_root(), tmp_path / "results")
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(runner, "_EXECUTED", executed)
    chapter = "03_ablating_one_head"
    assert runner.main(["--profile", "smoke", "--only", chapter, "-p", "alpha=0.3"]) == 0
    verdicts = compare_verdicts(before / "smoke", tmp_path / "results" / "smoke")
    moved = verdicts[verdicts["before ours"] != verdicts["after ours"]]
    assert len(moved), "alpha=0.3 moved no claim's numbers: the test shows nothing"
    html_folder = build_book({p.stem: p for p in executed.glob("*.ipynb")}, tmp_path / "book")
    page = _page_text(html_folder / "book" / "executed" / f"{chapter}.html")
    assert "alpha = 0.3" in page
    card = _page_text(html_folder / "book" / "executed" / "15_scorecard.html")
    for text in moved["after ours"]:
        assert " ".join(str(text).split()) in card, text


def test_a_chapter_never_run_gets_a_page_that_says_how_to_run_it(tmp_path):
    settings = runner.load_profile("smoke")
    out = tmp_path / "executed"
    out.mkdir()
    first = next(iter(settings.notebooks))
    (out / f"{first}.ipynb").write_text("{}")  # an executed copy stays as it is
    written = runner.placeholder_pages(settings, out)
    assert len(written) == len(settings.notebooks) - 1 and (out / f"{first}.ipynb").read_text() == "{}"
    page = nbformat.read(out / "03_ablating_one_head.ipynb", as_version=4)
    assert page.cells[0].source.startswith("# 03 · ")
    assert "--profile smoke --only 03_ablating_one_head" in page.cells[0].source
    assert page.metadata["sixteen_heads"]["status"] == "not run"
    assert not runner._is_current("03_ablating_one_head", {"profile": "smoke"}, out)  # the runner runs it
    assert runner.placeholder_pages(settings, out) == []


def test_the_lab_plan_builds_the_chapters_the_guides_lesson_uses():
    makefile = (ROOT / "Makefile").read_text()
    plan = re.search(r"^LAB_PLAN := ((?:.*\\\n)*.*)$", makefile, re.M).group(1).replace("\\\n", " ").split()
    guide = nbformat.read(ROOT / "notebooks" / "17_teaching_guide.ipynb", as_version=4)
    lesson = next(c.source for c in guide.cells if "## A 90-minute lab" in c.source)
    table = lesson[lesson.index("## A 90-minute lab") :].split("\n\n")[1]
    used = set(re.findall(r"\{doc\}`[^<`]*<([\w]+)>`", table))
    assert used == set(plan) - {"19_the_answer"}, (sorted(used), plan)  # the front page: the book's root


def test_the_teachers_key_keeps_a_finished_run_and_reruns_a_stale_one(chapters, tmp_path, monkeypatch):
    from helpers.book.running import teacher_key

    _notebook(chapters, "40_reader", _READ + "\nsave_table(pd.DataFrame({'a': [x]}), 'p', '40_w')")
    runs = []

    def run(argv: list[str]) -> int:  # the runner on our own notebook, its parameters given
        runs.append(argv)
        folder = Path(argv[argv.index("--output-dir") + 1])
        return 0 if runner.run_notebook("40_reader", {"x": 2}, output_dir=folder) else 1

    monkeypatch.setattr(runner, "main", run)
    monkeypatch.setattr(runner, "is_current", lambda _p, name, _o, out: runner._is_current(name, {"x": 2}, out))
    out, table = tmp_path / "key" / "40-x", tmp_path / "results" / "p" / "t.csv"
    own = out / "results" / "p" / "40_w.csv"

    def predict() -> int:
        assert teacher_key.run_prediction("p", "40_reader", "x=2", out) == 0
        return len(runs)

    assert predict() == 1 and own.is_file()
    assert not (tmp_path / "results" / "p" / "40_w.csv").exists()  # the profile's tables stay as they were
    assert predict() == 1  # finished on the same tables: kept
    pd.DataFrame({"a": [5]}).to_csv(table, index=False)
    assert predict() == 2  # a table it read changed in the profile: run again, on a new copy
    assert (out / "results" / "p" / "t.csv").read_bytes() == table.read_bytes()
    assert predict() == 2
    own.unlink()
    assert predict() == 3  # its own table is gone: run again
