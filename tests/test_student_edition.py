"""The student's edition of chapter 17b, made by one command (``make student-edition``: otter-grader's
``otter assign``), holds no answer, and its checks, run as a student runs them in the notebook
(``grader.check``), name the common mistakes they see."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
TEACHER = ROOT / "notebooks" / "17b_write_the_method.ipynb"


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    """The student's notebook, made by `make student-edition` into a folder of this test's."""
    out = tmp_path_factory.mktemp("edition") / "student-edition"
    done = subprocess.run(
        ["make", "--no-print-directory", "student-edition", f"STUDENT={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out / "student" / "17b_write_the_method.ipynb"


def _answers() -> list[str]:
    """Every line of the teacher's answers: code between BEGIN and END SOLUTION, and the folded
    answers to the predictions."""
    lines = []
    for cell in nbformat.read(TEACHER, as_version=4).cells:
        if cell.cell_type == "code":
            inside = re.findall(r"# BEGIN SOLUTION\n(.*?)# END SOLUTION", cell.source, re.S)
            lines += [line.strip() for block in inside for line in block.splitlines()]
        elif "The answer to the prediction" in cell.source:
            lines += [line.strip() for line in cell.source.splitlines()[3:-1]]
    return [line for line in lines if len(line) > 12]


def test_the_student_edition_holds_no_answer(edition):
    text = edition.read_text()
    answers = _answers()
    assert len(answers) > 30  # the four functions' bodies and the four answers
    found = [line for line in answers if json.dumps(line)[1:-1] in text]
    assert not found, found
    assert "The answer to the prediction" not in text
    student = nbformat.read(edition, as_version=4)
    checks = [c.source for c in student.cells if c.cell_type == "code" and "grader.check" in c.source]
    assert checks == [f'grader.check("{name}")' for name in ("gate", "importance", "bootstrap", "pruning")]


_PER_TOKEN = """
from helpers import head_importance

def my_importance(model, batches, loss_fn):
    return head_importance(model, batches, loss_fn, abs_per="token", progress=False)["self"]
"""
_NO_NORMALISATION = _PER_TOKEN.replace('abs_per="token"', "normalize=None")
_FIXED_DIRECTION = """
def my_bootstrap(a, b, indices):
    return b.mean() - a.mean(), float(((b[indices] - a[indices]).mean(1) <= 0).mean())
"""


def _run_with(edition: Path, answers: dict[str, str], folder: Path) -> list[str]:
    """The student's notebook executed with ``answers`` (question -> code) in its answer cells;
    the text each `grader.check` printed, in order."""
    import papermill as pm

    nb = nbformat.read(edition, as_version=4)
    order = iter(["gate", "importance", "bootstrap", "pruning"])
    for cell in nb.cells:
        if "otter_answer_cell" in cell.metadata.get("tags", []):
            name = next(order)
            cell.source = answers.get(name, "")
    path = folder / edition.name
    nbformat.write(nb, path)
    done = pm.execute_notebook(str(path), str(path), cwd=str(folder), kernel_name="python3", progress_bar=False)
    texts = []
    for cell in done.cells:
        if cell.cell_type == "code" and "grader.check" in cell.source:
            texts.append(" ".join(str(o.get("data", {}).get("text/plain", o.get("text", ""))) for o in cell.outputs))
    return texts


@pytest.mark.parametrize(
    ("answers", "question", "named"),
    [
        ({"importance": _PER_TOKEN}, 1, "the absolute value taken per token"),
        ({"importance": _NO_NORMALISATION}, 1, "without the per-layer normalisation"),
        ({"bootstrap": _FIXED_DIRECTION}, 2, "a p in one fixed direction"),
    ],
)
def test_the_notebooks_checks_name_each_common_mistake(edition, tmp_path, answers, question, named):
    import shutil

    shutil.copytree(edition.parent, tmp_path, dirs_exist_ok=True)
    texts = _run_with(edition, answers, tmp_path)
    assert named in texts[question], texts[question][-1500:]
    assert "passed" not in texts[question]


def test_the_teachers_page_folds_every_answer(smoke_book):
    """On the rendered 17b page each function's body sits in a folded cell and each prediction's
    answer in a folded box; otter's markers do not show."""
    import html as html_lib

    page = (smoke_book / "book" / "executed" / "17b_write_the_method.html").read_text(encoding="utf-8")
    folded_code = re.findall(r'class="cell tag_hide-input[^"]*".*?</details>', page, re.S)
    assert len(folded_code) == 4, len(folded_code)
    for body, name in zip(folded_code, ("my_gate", "my_importance", "my_bootstrap", "my_pruning_curve"), strict=True):
        assert name in html_lib.unescape(re.sub(r"<[^>]+>", "", body))
    assert page.count("The answer to the prediction") == 4
    assert page.count('class="dropdown admonition"') == 4  # folded until opened (sphinx-togglebutton)
    for marker in ("BEGIN QUESTION", "ASSIGNMENT CONFIG", "BEGIN TESTS", "END QUESTION"):  # raw cells: unseen
        assert marker not in page
