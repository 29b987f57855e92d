"""Concepts the book's machinery keeps in one place: the measures (book/store/measures.py) and the
metrics (heads/metrics.py). A test per concept looks for a second definition in the code."""

from __future__ import annotations

import ast
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
