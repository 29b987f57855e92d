"""No denormal arithmetic: flush-to-zero holds in every torch thread of a process that imports
helpers, and a saved model holds no denormal weight."""

import os
import subprocess
import sys

import torch
from tiny_models import ALL_CASES

import helpers
from helpers.heads.denormals import count_denormals, flushes_in_every_thread, plant_denormals_, zero_denormals_


def test_a_fresh_process_flushes_denormals_in_every_thread():
    code = (
        "import torch; torch.set_num_threads(2); import helpers; "
        "from helpers.heads.denormals import flushes_in_every_thread; print(flushes_in_every_thread())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    kept = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SIXTEEN_HEADS_KEEP_DENORMALS": "1"},
    )
    assert kept.stdout.strip() == "False"  # the check can fail: without the mode a worker thread computes them
    assert flushes_in_every_thread()  # and this test process flushes too (conftest imports helpers)


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
