"""Every notebook runs end to end on the smoke profile; profiles and notebooks stay in step."""

import json
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from helpers.book.running import runner

ROOT = Path(__file__).resolve().parent.parent
CODE_LINES = 90  # a chapter's code at most, blank and comment lines aside (../shared/CHAPTER_STYLE.md)
POSITIONAL = 2  # arguments a call in a chapter passes by position at most; the rest by keyword
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
PROFILES = ("smoke", "course", "paper")


def test_every_notebook_is_in_every_profile_and_the_book():
    toc = (ROOT / "_toc.yml").read_text()
    for profile in PROFILES:
        listed = list(runner.load_profile(profile).notebooks)
        assert listed == NOTEBOOKS, f"profiles/{profile}.yml lists {listed}, notebooks/ has {NOTEBOOKS}"
    for name in NOTEBOOKS:
        assert f"book/executed/{name}" in toc


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_stored_clean_with_a_parameters_cell(name):
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    # every profile parameter is declared in the parameters cell, in a form papermill can parse
    # (it cannot parse, e.g., a comment holding "="), so a profile overrides a default
    import papermill as pm

    declared = pm.inspect_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"))
    for profile in PROFILES:
        params = runner.parameters_for(runner.load_profile(profile), name, {})
        for key in params:
            assert key in declared, f"{key} (profile {profile}) is not a parameter papermill finds in {name}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_smoke_and_is_cached(name, smoke_executed):
    outcome = smoke_executed[name]
    if isinstance(outcome, Exception):
        pytest.fail(str(outcome))
    nb = nbformat.read(outcome, as_version=4)
    assert nb.metadata["sixteen_heads"]["parameters"]["profile"] == "smoke"
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "a cell was not executed"
    assert any(c.outputs for c in code)
    from helpers.book import course

    profile = runner.load_profile("smoke")
    again = runner.run_notebook(
        name, runner.parameters_for(profile, name, {}), output_dir=outcome.parent, models=course.models_key(profile)
    )
    assert again[2] and again[1] == 0.0  # unchanged: reused, not run (a change reruns: see the fingerprint test)


def test_runner_records_each_chapters_run_time(smoke_executed, tmp_path, monkeypatch):
    import pandas as pd

    from helpers.book.store import results

    table = pd.read_csv(results.results_dir("smoke") / "run_times.csv")
    assert set(NOTEBOOKS) <= set(table["notebook"]) and (table["seconds"] > 0).all()
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    results.record_run_time("p", "a", 3.0)
    results.record_run_time("p", "b", 1.0)
    results.record_run_time("p", "a", 5.0)  # a rerun replaces the row
    table = pd.read_csv(tmp_path / "results" / "p" / "run_times.csv")
    assert list(table["notebook"]) == ["a", "b"] and list(table["seconds"]) == [5.0, 1.0]


def test_fingerprint_follows_notebook_parameters_models_and_the_code_it_runs(tmp_path, monkeypatch):
    heads = tmp_path / "helpers" / "heads"
    heads.mkdir(parents=True)
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (heads / "__init__.py").write_text("")
    (heads / "gates.py").write_text("SCALE = 1\n")
    (heads / "unused.py").write_text("OTHER = 1\n")
    notebook = tmp_path / "chapter.ipynb"
    notebook.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "from helpers.heads import gates\n"}]}))
    monkeypatch.setattr(runner, "ROOT", tmp_path)
    key = runner.fingerprint(notebook, {"seed": 0}, "models-a")
    assert runner.fingerprint(notebook, {"seed": 0}, "models-a") == key
    assert runner.fingerprint(notebook, {"seed": 1}, "models-a") != key
    assert runner.fingerprint(notebook, {"seed": 0}, "models-b") != key
    (heads / "gates.py").write_text("SCALE = 1  # a comment reruns nothing\n")
    assert runner.fingerprint(notebook, {"seed": 0}, "models-a") == key
    (heads / "unused.py").write_text("OTHER = 2\n")  # a module the chapter never imports
    assert runner.fingerprint(notebook, {"seed": 0}, "models-a") == key
    (heads / "gates.py").write_text("SCALE = 2\n")  # a library change reruns the chapter
    assert runner.fingerprint(notebook, {"seed": 0}, "models-a") != key


def test_chapter_modules_follow_imports_transitively_with_parent_packages():
    from helpers.book.running.chapter_code import PACKAGE, chapter_modules

    names = {
        p.relative_to(PACKAGE).as_posix() for p in chapter_modules(ROOT / "notebooks" / "03_ablating_one_head.ipynb")
    }
    assert {
        "__init__.py",
        "book/__init__.py",
        "book/verdicts/__init__.py",
        "book/experiments/head_effects.py",
        "book/chapters/ch03_ablating_one_head.py",
        "sweeps/ablation.py",
        "heads/gates.py",
        "heads/significance.py",
    } <= names
    assert "book/running/runner.py" not in names  # the chapter never runs the runner
    assert (
        "book/chapters/ch04_keeping_one_head.py" not in names
    )  # nor another chapter's findings: editing them reruns only chapter 04
    intro = {p.relative_to(PACKAGE).as_posix() for p in chapter_modules(ROOT / "notebooks" / "16_rerunning.ipynb")}
    assert "book/experiments/head_effects.py" not in intro


def test_runner_reports_the_failing_cell(tmp_path, monkeypatch):
    bad = tmp_path / "notebooks"
    bad.mkdir()
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("raise ValueError('broken on purpose')"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, bad / "broken.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS", bad)
    with pytest.raises(
        runner.NotebookFailed,
        match=r"broken failed in the cell starting \"raise ValueError\('broken on purpose'\)\" \(ValueError: broken "
        r"on purpose\)",
    ):
        runner.run_notebook("broken", {"x": 2}, output_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "broken.ipynb").exists()  # no finished-looking output


def test_overrides_parse_as_yaml_and_bad_ones_are_explained():
    assert runner.parse_overrides(["seed=3", "model_name=bert-base-uncased", "prune_share=0.4"]) == {
        "seed": 3,
        "model_name": "bert-base-uncased",
        "prune_share": 0.4,
    }
    with pytest.raises(SystemExit, match="name=value"):
        runner.parse_overrides(["seed"])
    with pytest.raises(SystemExit, match="unknown profile 'gpu'"):
        runner.load_profile("gpu")


def test_parameters_fold_into_one_cell_with_the_values_in_force():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "# Parameters (papermill injects the profile's values after this cell)\n"
                'profile = "course"\nmax_examples = 0      # 0: the whole split\nbeam = 5\n'
                "epochs = [1, 2]  # checkpoints",
                metadata={"tags": ["parameters"]},
            ),
            nbformat.v4.new_code_cell(
                '# Parameters\nprofile = "smoke"\nmax_examples = 30\n', metadata={"tags": ["injected-parameters"]}
            ),
        ]
    )
    runner.fold_parameters(nb, {"profile": "smoke", "max_examples": 30, "beam": 5, "epochs": [1, 2, 3]}, width=75)
    assert nb.cells[0].source.splitlines() == [
        "# Parameters of this run (smoke profile)",
        "# a changed default is named in its comment",
        "profile = 'smoke'  # (default: \"course\")",
        "max_examples = 30  # 0: the whole split (default: 0)",
        "beam = 5",
        "epochs = [1, 2, 3]  # checkpoints (default: [1, 2])",
    ]
    assert nb.cells[1].metadata["tags"] == ["injected-parameters", "remove-cell"]
    exec(nb.cells[0].source, scope := {})  # still valid Python with the same values
    assert (scope["max_examples"], scope["epochs"]) == (30, [1, 2, 3])


def test_folded_parameters_fit_the_width_a_chapter_page_shows():
    """A long meaning, a long default and a long value each move to their own lines, so that no
    line of the folded cell is wider than the notebooks' line length; a default written over
    several lines folds whole; the cell stays valid Python with the values in force."""
    source = (
        "# Parameters (papermill injects the profile's values after this cell)\n"
        'profile = "course"\n'
        "evict_budgets = [0.75, 0.5, 0.25, 0.1]  # heavy hitters read one position at a time: the costliest\n"
        'keep_prompt = (\n    "In the beginning God created the heavens and the earth. "\n    "Now the earth was"\n)\n'
        "seed = 0"
    )
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(source, metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("# Parameters\n", metadata={"tags": ["injected-parameters"]}),
        ]
    )
    values = {
        "profile": "smoke",
        "evict_budgets": [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125],
        "keep_prompt": "A prompt long enough that its value alone is wider than a code cell of the book shows",
        "seed": 0,
    }
    runner.fold_parameters(nb, values, width=60)
    folded = nb.cells[0].source
    assert all(len(line) <= 60 for line in folded.splitlines()), folded
    assert "# heavy hitters read one position at a time: the costliest" in folded  # the meaning, above
    assert "(default: [0.75, 0.5, 0.25, 0.1])" in folded and "Now the earth was" in folded  # the defaults
    assert folded.splitlines()[-1] == "seed = 0"  # unchanged lines stay
    exec(folded, scope := {})
    assert {k: scope[k] for k in values} == values


def test_progress_widgets_leave_the_executed_notebook_and_other_outputs_stay():
    bar = nbformat.v4.new_output(
        "display_data",
        data={
            "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2, "version_minor": 0},
            "text/plain": "ablation sweep:   0%|          | 0/8 [00:00<?, ?config/s]",
        },
    )
    table = nbformat.v4.new_output("display_data", data={"text/html": "<table></table>", "text/plain": "table"})
    printed = nbformat.v4.new_output("stream", name="stdout", text="8 heads\n")
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("sweep()", outputs=[bar, table, printed]),
            nbformat.v4.new_markdown_cell("prose"),
            nbformat.v4.new_code_cell("again()", outputs=[bar]),
        ]
    )
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    assert runner.drop_progress_widgets(nb) == 2
    assert nb.cells[0].outputs == [table, printed] and nb.cells[2].outputs == []
    assert "widgets" not in nb.metadata
    nbformat.validate(nb)
    assert runner.drop_progress_widgets(nb) == 0


def test_the_repository_address_is_written_in_one_place():
    import subprocess

    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    line = runner.launch_links("03_ablating_one_head", "course")
    if not url:  # no repository set: the pages say how to run locally, and link nowhere
        assert "colab" not in line.lower() and "binder" not in line.lower()
        assert "make setup" in line and "--profile course --only 03_ablating_one_head" in line
        return
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:  # not a git checkout (e.g. an sdist): every text file under the root
        files = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    naming = [f for f in files if (ROOT / f).is_file() and url in (ROOT / f).read_text(errors="ignore")]
    assert naming == ["_config.yml"], f"the repository address {url} is also in {naming}: read it from _config.yml"
    assert url.split("github.com/")[-1] in line


def test_launch_links_follow_the_repository_setting():
    line = runner.launch_links("06_pruning_curves", "smoke", ("https://github.com/someone/heads", "dev"))
    assert "colab.research.google.com/github/someone/heads/blob/dev/notebooks/06_pruning_curves.ipynb" in line
    assert "mybinder.org/v2/gh/someone/heads/dev?labpath=notebooks/06_pruning_curves.ipynb" in line
    assert "git clone https://github.com/someone/heads && pip install -e heads" in line
    assert "[its code](https://github.com/someone/heads/blob/dev/helpers/book/chapters/ch06_pruning_curves.py)" in line
    local = runner.launch_links("06_pruning_curves", "smoke", ("", "main"))
    assert "--profile smoke --only 06_pruning_curves" in local and "mybinder" not in local
    assert "its code: `helpers/book/chapters/ch06_pruning_curves.py`" in local


def test_every_chapter_with_a_module_names_it_and_the_rest_name_none():
    named = {nb.stem: runner.chapter_module(nb.stem) for nb in runner.NOTEBOOKS.glob("*.ipynb")}
    assert named["15_scorecard"] == "helpers/book/scorecard/ch15_scorecard.py"
    assert named["16_rerunning"] is None
    modules = {p.stem for p in (ROOT / "helpers" / "book" / "chapters").glob("ch*.py")}
    assert {Path(m).stem for m in named.values() if m and "/chapters/" in m} == modules


def test_each_chapter_links_the_tables_it_saved(tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    folder = tmp_path / "results" / "p"
    folder.mkdir(parents=True)
    for name in ("03_counts", "03_effects", "04_layers", "run_times"):
        (folder / f"{name}.csv").write_text("a,b\n1,2\n")
    out = tmp_path / "executed"
    text = runner.data_links("03_ablating_one_head", "p", out)
    assert "{download}`03_counts.csv <data/p/03_counts.csv>`" in text and "04_layers" not in text
    assert (out / "data" / "p" / "03_effects.csv").read_text() == "a,b\n1,2\n"
    assert runner.data_links("01_gates_and_pruning", "p", out) is None  # saved nothing: no line
    every = runner.data_links("15_scorecard", "p", out)
    assert all(f"{n}.csv" in every for n in ("03_counts", "03_effects", "04_layers", "run_times"))


def test_the_smoke_build_leaves_the_repository_as_it_found_it(smoke_book):
    """The models, results, executed notebooks and book of the smoke build all went to the test
    session's temporary folders: the repository's own tree, ignored files included, is unchanged."""
    from conftest import STATE_AT_START, repository_state

    assert repository_state() == STATE_AT_START


def _displayed_table(cell) -> pd.DataFrame:
    """The DataFrame a code cell displayed, read back from its HTML, with flat column names."""
    import io

    html = "".join("".join(o["data"]["text/html"]) for o in cell.outputs if "text/html" in o.get("data", {}))
    table = pd.read_html(io.StringIO(html))[0]
    # two header rows: the columns (the first headed by the profile's name) and the index names
    table.columns = [a if str(b).startswith("Unnamed") else b for a, b in table.columns]
    return table


def test_every_chapter_prints_the_scorecards_verdicts(smoke_executed):
    """Each chapter that tests a claim of the paper shows, in its verdict table, the verdict the
    scorecard gives that claim, on both measures, with every cell whole; its findings text does
    not say the verdicts again."""
    from helpers.book.scorecard.card import CLAIMS, scorecard
    from helpers.book.verdicts.engine import LIKELIHOOD_NAME, METRIC, NOT_MEASURED, few_words

    card = scorecard("smoke").set_index("claim")
    chapters = sorted({c.chapter for c in CLAIMS})
    assert len(chapters) == 13  # chapters 03 to 10, 12, 13, 13b, 14 and 14b
    for chapter in chapters:
        nb = nbformat.read(smoke_executed[chapter], as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        table = _displayed_table(next(c for c in code if "show_verdicts(" in c.source))
        text = "".join(
            o["data"].get("text/markdown", "")
            for c in code
            if ".findings(" in c.source
            for o in c.outputs
            if "data" in o
        )
        shown = {
            (claim, measure): (ours, verdict)
            for claim, measure, ours, verdict in zip(table["claim"], table["measure"], table["ours"], table["verdict"])
        }
        for claim in (c for c in CLAIMS if c.chapter == chapter):
            row = card.loc[claim.claim]
            for measure, column, evidence in (
                (METRIC, "verdict", "ours"),
                (LIKELIHOOD_NAME, "likelihood verdict", "likelihood"),
            ):
                if row[column] == NOT_MEASURED:
                    continue
                measure = claim.shown_measure(measure)  # a claim beyond the paper names its own measure
                ours, verdict = shown[(claim.claim, measure)]
                assert verdict == row[column], (chapter, claim.key, measure)
                # the first words in view, the whole text one click away (folded in the cell)
                assert ours.startswith(few_words(row[evidence])) and row[evidence] in ours, (chapter, claim.key)
                assert claim.claim not in text, (chapter, claim.key)  # said once: in the table


def test_a_rules_parameters_default_to_its_chapters():
    """A claim whose rule reads a chapter parameter uses the chapter's default when no run recorded one."""
    import papermill as pm

    from helpers.book.scorecard.card import CLAIMS

    for claim in (c for c in CLAIMS if c.parameters):
        declared = pm.inspect_notebook(str(ROOT / "notebooks" / f"{claim.chapter}.ipynb"))
        for name, default in claim.parameters.items():
            assert float(declared[name]["default"]) == default, (claim.key, name)


def notebook_line_length() -> int:
    """The line length the notebooks are held to (``notebooks/ruff.toml``), narrower than the
    project's: the width of a code cell in the built book (tests/test_book_in_browser.py)."""
    import tomllib

    return tomllib.loads((ROOT / "notebooks" / "ruff.toml").read_text())["line-length"]


def code_lines(source: str) -> list[str]:
    """The lines of a code cell that count toward a chapter's budget: every physical line that is
    not blank and not a comment, an import's names one a line as the formatter spreads them (a
    chapter that imports many names from its module has many entry points: fewer is the fix)."""
    return [line for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]


def positional_calls(source: str, most: int = POSITIONAL) -> list[str]:
    """The calls in ``source`` (a code cell; IPython magics skipped) that pass more than ``most``
    arguments by position, as written."""
    import ast

    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    return [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call) and len(n.args) > most]


def test_the_positional_check_finds_what_it_should():
    assert positional_calls("f(a, b)\ng(a, b, c=1)\nh(x, **kw)") == []
    calls = "plan = mb.Plan(a, b, c)\nsave(t, p, name='x')\nsave(t, p, 'x')"
    assert positional_calls(calls) == ["mb.Plan(a, b, c)", "save(t, p, 'x')"]
    assert positional_calls("f(g(a, b, c), d)") == ["g(a, b, c)"]  # nested calls too
    assert code_lines("# comment\n\nx = 1\n    # indented comment\ny = f(\n    x\n)") == [
        "x = 1",
        "y = f(",
        "    x",
        ")",
    ]
    assert code_lines("from m import (\n    a,\n    b,\n)\nimport os\nz = 2") == [
        "from m import (",
        "    a,",
        "    b,",
        ")",
        "import os",
        "z = 2",
    ]


def test_each_chapter_says_its_findings_once_and_within_its_code_budget():
    """One generated text per chapter (its findings), no second printout of the same facts; at most
    ``CODE_LINES`` lines of code, none longer than the notebooks' line length, and no call that
    passes more than ``POSITIONAL`` arguments by position, in every chapter."""
    import ast

    width = notebook_line_length()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        assert sum(len(re.findall(r"\bfindings\(", c)) for c in code) <= 1, path.name
        assert not any(".facts(" in c for c in code), path.name
        lines = [line for c in code for line in code_lines(c)]
        assert len(lines) <= CODE_LINES, f"{path.name}: {len(lines)} code lines (the budget is {CODE_LINES})"
        long = [line for c in code for line in c.splitlines() if len(line) > width]
        assert not long, f"{path.name}: lines over {width} characters: {long}"
        calls = [call for c in code for call in positional_calls(c)]
        assert not calls, f"{path.name}: calls with more than {POSITIONAL} positional arguments: {calls}"
    for module in [
        *(ROOT / "helpers" / "book").glob("experiments/*.py"),
        *(ROOT / "helpers" / "book").glob("chapters/*.py"),
    ]:
        defined = {n.name for n in ast.parse(module.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert "facts" not in defined, f"{module.name}: a chapter's facts belong in its findings"
