"""No denormal arithmetic: flush-to-zero holds in every torch thread of a process that calls
``flush_denormals`` first (the book's kernels, ``make models`` and its workers, the benchmarks, these
tests), importing the library leaves a process's float mode alone, and a saved model holds no
denormal weight."""

import os
import subprocess
import sys
from pathlib import Path

import torch
from tiny_models import ALL_CASES

import helpers
from helpers.base.denormals import count_denormals, flushes_in_every_thread, plant_denormals_, zero_denormals_


def _fresh_process(code: str, **env: str) -> str:
    prelude = "import torch; torch.set_num_threads(2); from helpers.base.denormals import flushes_in_every_thread; "
    out = subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, check=True, env={**os.environ, **env}
    )
    return out.stdout.strip()


def test_a_process_that_calls_flush_denormals_flushes_in_every_thread():
    flushed = "from helpers.base.denormals import flush_denormals; flush_denormals(); print(flushes_in_every_thread())"
    assert _fresh_process(flushed) == "True"
    # the check can fail: with the mode kept off a worker thread computes denormals
    assert _fresh_process(flushed, SIXTEEN_HEADS_KEEP_DENORMALS="1") == "False"
    assert flushes_in_every_thread()  # and this test process flushes too (conftest calls it)


def test_importing_the_library_leaves_the_float_mode_alone():
    assert _fresh_process("import helpers, helpers.heads; print(flushes_in_every_thread())") == "False"


def test_the_books_kernels_flush_before_the_first_cell(tmp_path):
    import nbformat
    import papermill as pm

    from helpers.book.running.runner import KERNEL_ARGUMENTS

    check = "from helpers.base.denormals import flushes_in_every_thread\nprint(flushes_in_every_thread())"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(check)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "check.ipynb")
    outputs = {}
    for name, arguments in (("book", KERNEL_ARGUMENTS), ("plain", [])):
        done = pm.execute_notebook(
            str(tmp_path / "check.ipynb"),
            str(tmp_path / f"{name}.ipynb"),
            kernel_name="python3",
            extra_arguments=arguments,
            progress_bar=False,
        )
        outputs[name] = done.cells[0].outputs[0]["text"].strip()
    assert outputs == {"book": "True", "plain": "False"}


def test_model_builds_and_their_workers_flush_first():
    from helpers.book.course import building

    source = Path(building.__file__).read_text()
    assert "initializer=flush_denormals" in source and "    flush_denormals()" in source


def test_denormal_weights_are_counted_planted_and_zeroed():
    model = torch.nn.Sequential(torch.nn.Linear(50, 40), torch.nn.Linear(40, 3))
    assert count_denormals(model) == 0
    planted = plant_denormals_(model, 0.05)
    assert planted == count_denormals(model) and planted >= int(0.05 * sum(p.numel() for p in model.parameters()))
    assert zero_denormals_(model) == planted and count_denormals(model) == 0


def test_a_saved_model_holds_no_denormal_weight(tmp_path):
    for name in ("bert", "llama"):
        case = ALL_CASES[name]()
        planted = plant_denormals_(case.model, 0.01)
        assert planted > 0 and count_denormals(case.model) == planted
        reference = case.run(case.model, case.batch)  # computed with the mode on: the denormals read as zero
        helpers.save_pruned(case.model, tmp_path / name)
        loaded = helpers.load_pruned(tmp_path / name)
        assert count_denormals(loaded) == 0 and count_denormals(case.model) == 0
        assert torch.equal(case.run(loaded, case.batch), reference)


def test_every_built_model_holds_no_denormal_weight(smoke):
    from helpers.book import course
    from helpers.zoo import model_cache

    for name in course.model_specs(smoke):
        folder = course.ensure_built(smoke, name)
        assert count_denormals(model_cache.load_built(folder)[0]) == 0, name
        if course.model_specs(smoke)[name]["task"] == "translation":
            assert count_denormals(model_cache.load_built(folder, 1)[0]) == 0, f"{name}, epoch 1"
