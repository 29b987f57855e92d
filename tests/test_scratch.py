"""Scratch folders outlive the cells that use them and are gone when the process ends, so a
chapter rerun many times (chapter 14b writes about 1.2 GB of GGUF files a run) leaves nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import papermill

_EXPORT = """
import torch
from helpers.book.chapters import ch14b_served_at_equal_memory as ch
from helpers.zoo.registry import load_causal_lm

model, _ = load_causal_lm("tiny-llama-32", seed=0)
importance = {"self": torch.rand(4, 6, generator=torch.Generator().manual_seed(0))}
setups = [s for s in ch.SETUPS if s.name in (ch.REFERENCE, "1/3 KV groups removed")]
files = ch.export_setups(model, importance, setups=setups, language_model="tiny-llama-32")
folders = {f.path.parent for f in files.values()}
assert len(folders) == 1 and all(f.path.stat().st_size > 0 for f in files.values())
print(folders.pop())
"""


def test_chapter_14b_exports_leave_no_files_once_the_process_ends():
    done = subprocess.run([sys.executable, "-c", _EXPORT], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder.name.startswith("sixteen-heads-14b-")
    assert not folder.exists(), f"{folder} was left behind"


def test_a_scratch_folder_made_in_a_notebook_is_gone_when_its_run_ends(tmp_path):
    code = (
        "from helpers.base.scratch import scratch_folder\n"
        "folder = scratch_folder(prefix='sixteen-heads-test-')\n"
        "(folder / 'kept until exit').write_text('x')\n"
        "print(folder)"
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbformat.write(notebook, tmp_path / "in.ipynb")
    ran = papermill.execute_notebook(
        str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False
    )
    folder = Path(ran.cells[0].outputs[0]["text"].strip())
    assert folder.name.startswith("sixteen-heads-test-")
    assert not folder.exists(), f"{folder} was left behind by the notebook's kernel"
