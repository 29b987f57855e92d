"""The "What it costs" page's tables and paragraph follow what a build recorded."""

import json

import pandas as pd
import pytest

from helpers.book.running import costs
from helpers.book.store import results


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """A results folder with two chapters' times and a models.json of two model runs whose
    folders hold known bytes (one with sweeps)."""
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    folder = results.results_dir("p")
    pd.DataFrame(
        {"notebook": ["01_a", "02_b"], "seconds": [90.0, 30.0], "finished": ["2026-01-01 10:00", "2026-01-01 10:02"]}
    ).to_csv(folder / "run_times.csv", index=False)
    models = {}
    for name, weights, sweeps in (("m@0", 3000, 500), ("m@1", 1000, 0)):
        path = tmp_path / "cache" / name
        (path / "sweeps").mkdir(parents=True)
        (path / "model.bin").write_bytes(b"x" * weights)
        if sweeps:
            (path / "sweeps" / "s.json").write_bytes(b"y" * sweeps)
        models[name] = {
            "task": "nli",
            "train_seconds": 120.0 if name == "m@0" else 60.0,
            "machine": "cpu",
            "built": "2026-01-01",
            "reused_from_cache": name == "m@1",
            "path": str(path),
        }
    summary = {
        "profile": "p",
        "machine": {"cpu_model": "Test CPU", "cpus": 2, "torch": "2.x"},
        "models": models,
        "seconds_this_run": 150.0,
    }
    (folder / "models.json").write_text(json.dumps(summary))
    converted = tmp_path / "converted"
    (converted / "lm").mkdir(parents=True)
    (converted / "lm" / "w").write_bytes(b"z" * 2048)
    return folder, converted


def test_tables_add_up_to_what_was_recorded(recorded):
    folder, converted = recorded
    times = costs.chapter_times("p", ["01_a", "02_b", "03_c"])
    assert list(times["notebook"]) == ["01_a", "02_b", "03_c"]
    assert times["seconds"].iloc[:2].tolist() == [90.0, 30.0] and pd.isna(times["seconds"].iloc[2])
    summary = results.read_models_summary("p")
    models = costs.model_times(summary)
    assert models.set_index("model")["train_minutes"].to_dict() == {"m@0": 2.0, "m@1": 1.0}
    disk = costs.cache_sizes(summary, converted).set_index("what")
    assert disk.loc["m@0", "model_mb"] * costs.MB == pytest.approx(3000)
    assert disk.loc["m@0", "sweeps_mb"] * costs.MB == pytest.approx(500)
    assert disk.loc["converted: lm", "model_mb"] * costs.MB == pytest.approx(2048)
    assert costs.machine_table(summary).loc["cpus", "value"] == "2"
    # the book's last chapter runs after the costs page: in a first build it has no time yet
    shown = costs.shown_times(costs.chapter_times("p", ["01_a", "02_b", "03_c", "19_d"]), after=["19_d"])
    assert shown.set_index("notebook")["minutes"].to_dict() == {
        "01_a": 1.5,
        "02_b": 0.5,
        "03_c": "not run yet",
        "19_d": "runs after this page",
    }


def test_the_paragraph_follows_the_recorded_numbers(recorded):
    folder, converted = recorded
    chapters = ["01_a", "02_b", "03_c"]

    def text():
        summary = results.read_models_summary("p")
        return costs.summary_text(
            "p",
            summary,
            models=costs.model_times(summary),
            times=costs.chapter_times("p", chapters),
            disk=costs.cache_sizes(summary, converted),
        )

    first = text()
    assert "Test CPU with 2 CPUs" in first
    assert (
        "2 model runs trained for 3.0 min" in first and "2.5 min of wall time" in first and "reused 1 of them" in first
    )
    assert "The 2 chapters with a recorded run took 2.0 min, the longest `01_a` (1.5 min)" in first
    assert "Not run yet on this profile: `03_c`" in first
    # a rerun that records other times changes the sentence
    pd.DataFrame({"notebook": ["01_a", "02_b", "03_c"], "seconds": [30.0, 300.0, 60.0], "finished": ["x"] * 3}).to_csv(
        folder / "run_times.csv", index=False
    )
    second = text()
    assert "The 3 chapters with a recorded run took 6.5 min, the longest `02_b` (5.0 min)" in second
    assert "Not run yet" not in second


def test_before_any_build_the_page_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path))
    summary = results.read_models_summary("fresh")
    assert summary == {}
    times = costs.chapter_times("fresh", ["01_a"])
    text = costs.summary_text(
        "fresh",
        summary,
        models=costs.model_times(summary),
        times=times,
        disk=costs.cache_sizes(summary, tmp_path / "none"),
    )
    assert text.startswith("No build of the `fresh` profile has been recorded here yet")
