"""Concepts the book's machinery keeps in one place: the measures (book/store/measures.py), the
metrics (heads/metrics.py) and the reader of result tables (book/store/results.py). A test per
concept looks for a second definition in the code."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import helpers
from helpers.book.store import measures
from helpers.heads import metrics, significance

PACKAGE = Path(helpers.__file__).parent


def _constants(path: Path) -> list[tuple[int, object]]:
    """The literal values in ``path``'s code, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and id(node) not in docstrings
    ]


def test_the_measures_names_and_suffixes_are_written_once():
    written = {m.name for m in measures.MEASURES} | {m.suffix for m in measures.MEASURES if m.suffix}
    found = [
        f"{path.relative_to(PACKAGE)}:{line} {value!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "book" / "store" / "measures.py"
        for line, value in _constants(path)
        if value in written
    ]
    assert found == []
    assert [m.table("03_one_head_counts") for m in measures.MEASURES] == [
        "03_one_head_counts",
        "03_one_head_counts_likelihood",
    ]


def test_each_metric_is_defined_once_and_the_bootstrap_reads_it():
    defined = {"accuracy_stats", "confusion_stats", "accuracy_from_stats", "matthews_from_stats", "f1_from_stats"}
    defined |= {"log_likelihood", "bleu_stats", "bleu_from_stats"}
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "heads" / "metrics.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name in defined
    ]
    assert found == []
    assert significance.log_likelihood is metrics.log_likelihood
    assert all(isinstance(m, metrics.Metric) for m in metrics.METRICS.values())
    assert metrics.accuracy is metrics.METRICS["accuracy"]


# parses the paper's tables, written out in its source, not a run's results
_NOT_RESULTS = {PACKAGE / "book" / "paper" / "values.py"}


def _csv_readers(path: Path) -> list[int]:
    """Lines of ``path`` that call a ``read_csv``."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) == "read_csv" or getattr(node.func, "id", None) == "read_csv")
    ]


def test_result_tables_are_read_in_store_only():
    store = PACKAGE / "book" / "store"
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted((PACKAGE / "book").rglob("*.py"))
        if store not in path.parents and path not in _NOT_RESULTS and (lines := _csv_readers(path))
    }
    assert found == {}, f"result tables read outside book/store/ (use store.results.read_table): {found}"
    assert _csv_readers(store / "results.py")  # the reader is there


def test_each_chapters_findings_take_the_tables_its_notebook_holds():
    import importlib

    from helpers.book.store.results import ChapterTables

    chapters = sorted((PACKAGE / "book" / "chapters").glob("ch*.py"))
    checked = 0
    for path in chapters:
        module = importlib.import_module(f"helpers.book.chapters.{path.stem}")
        if not hasattr(module, "findings") or path.stem.startswith("ch15_"):  # the scorecard's take the card
            continue
        first = next(iter(inspect.signature(module.findings, eval_str=True).parameters.values()))
        assert first.annotation is ChapterTables, (path.stem, first)
        checked += 1
    assert checked == 14
    notebooks = sorted((PACKAGE.parent / "notebooks").glob("*.ipynb"))
    calls = [line for nb in notebooks for line in nb.read_text().splitlines() if "findings(profile" in line]
    assert calls == [], calls


def test_a_chapters_saved_table_is_held_as_its_file_reads(tmp_path, monkeypatch):
    import pandas as pd
    import pytest

    from helpers.book.store import results

    monkeypatch.setenv(results.ENV, str(tmp_path))
    table = pd.DataFrame({"seed": [0, None], "kind": ["self", "enc-dec"], "r": [0.1, 1 / 3]}, index=[5, 7])
    tables = results.ChapterTables("p")
    tables.save({"03_t": table})
    on_disk = pd.read_csv(tmp_path / "p" / "03_t.csv")
    (tmp_path / "p" / "03_t.csv").unlink()  # held: the file is not read again
    pd.testing.assert_frame_equal(tables["03_t"], on_disk)
    assert list(tables) == ["03_t"]
    shown = tables["03_t"]
    shown.loc[0, "r"] = 9.0  # a finding that edits what it was given leaves the held table as saved
    assert tables["03_t"].loc[0, "r"] == 0.1
    pd.DataFrame({"a": [1]}).to_csv(tmp_path / "p" / "04_u.csv", index=False)
    assert tables["04_u"]["a"].tolist() == [1]  # another chapter's table: read from the results folder
    assert tables.get("05_missing") is None
    with pytest.raises(results.MissingTable, match=r"05_missing.csv is missing: .*--profile p --only 05_cross_domain"):
        tables["05_missing"]


# what computes a statistic: a table of the chapter's own (``summary``, ``spread``, gains) or a
# number a reader would take for a result; the findings format what the tables hold
_STATISTICS = {
    "mean", "median", "std", "var", "sem", "quantile", "percentile", "corr", "corrcoef", "cov",
    "pearsonr", "spearmanr", "kendalltau", "binomtest", "chance_flag_rate", "speed_gains",
    "speed_summary", "class_by_class", "summary", "spread", "keep_one_summary",
}  # fmt: skip


def _reached_from_findings(tree: ast.Module) -> list[ast.FunctionDef]:
    """``findings`` and every function of the module it calls, directly or not."""
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    reached, todo = {}, ["findings"]
    while todo:
        name = todo.pop()
        if name in reached or name not in functions:
            continue
        reached[name] = functions[name]
        todo += [
            c.func.id for c in ast.walk(functions[name]) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
        ]
    return list(reached.values())


def test_no_chapters_findings_compute_a_statistic():
    found = []
    for path in sorted((PACKAGE / "book" / "chapters").glob("ch*.py")):
        for function in _reached_from_findings(ast.parse(path.read_text())):
            for node in ast.walk(function):
                name = getattr(node, "func", None)
                name = getattr(name, "attr", None) or getattr(name, "id", None)
                imported = isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
                    "scipy",
                    "statistics",
                )
                if (isinstance(node, ast.Call) and name in _STATISTICS) or imported:
                    found.append(f"{path.stem}.{function.name}:{node.lineno}")
    assert found == [], f"findings that compute what a saved table should hold: {found}"
