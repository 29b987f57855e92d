"""The ledger times each block once: nested blocks count in their own category, shares add up to
the whole, and a chapter's entries reach the runner's table."""

import json
import time

import pandas as pd
import pytest
import torch

from helpers.base import ledger
from helpers.book.store import sweep_costs


def test_nested_entries_count_once_and_carry_the_model_name():
    seen = []
    stop = ledger.listen(seen.append)
    model = ledger.name_model(torch.nn.Linear(2, 2), "nli@1")
    try:
        with ledger.entry(ledger.CONTAINER, "pruning curve", model=model, configs=3):
            time.sleep(0.02)
            with ledger.entry("decoding", "BLEU", model=model, examples=10, configs=3) as inner:
                inner.set_computed(2)
                time.sleep(0.05)
    finally:
        stop()
    inner, outer = seen
    assert (inner.category, inner.model, inner.depth, inner.computed, inner.configs) == ("decoding", "nli@1", 1, 2, 3)
    assert outer.depth == 0 and outer.seconds >= inner.seconds + 0.02
    assert outer.own_seconds == pytest.approx(outer.seconds - inner.seconds)
    assert ledger.model_name(torch.nn.Linear(1, 1)) == "Linear"
    with pytest.raises(ValueError, match="unknown ledger category"):
        with ledger.entry("thinking", "x"):
            pass


def test_a_chapters_ledger_file_becomes_its_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path))
    path = sweep_costs.running_ledger("p", "03_x")
    monkeypatch.setenv(ledger.ENV, str(path))
    model = ledger.name_model(torch.nn.Linear(2, 2), "translation@1 epoch 4")
    with ledger.entry(ledger.CONTAINER, "curves", model=model, configs=5):
        with ledger.entry("teacher-forced scoring", "likelihood", model=model, examples=400, configs=5) as e:
            e.set_computed(4)
        with ledger.entry("importance", "head importance", model="smollm2", examples=24):
            pass
    monkeypatch.delenv(ledger.ENV)
    sweep_costs.record_sweep_costs("p", "03_x", path)
    assert not path.exists()
    table = sweep_costs.read_sweep_costs("p")
    assert list(table["category"]) == ["teacher-forced scoring", "importance", "container"]
    row = table.iloc[0]
    assert (row["model"], row["seed"], row["examples"], row["computed"]) == ("translation epoch 4", 1, 400, 4)
    assert row["seconds_per_config_example"] == pytest.approx(row["seconds"] / (4 * 400))
    assert pd.isna(table.iloc[1]["seed"]) and table.iloc[1]["model"] == "smollm2"
    # a second chapter keeps the first's rows; a rerun of the first replaces them
    other = sweep_costs.running_ledger("p", "04_y")
    other.write_text(
        json.dumps(
            {
                "category": "decoding",
                "what": "w",
                "model": "m",
                "examples": 2,
                "configs": 1,
                "computed": 0,
                "depth": 0,
                "seconds": 1.5,
                "own_seconds": 1.5,
            }
        )
        + "\n"
    )
    sweep_costs.record_sweep_costs("p", "04_y", other)
    rerun = sweep_costs.running_ledger("p", "03_x")
    rerun.write_text("")
    sweep_costs.record_sweep_costs("p", "03_x", rerun)
    table = sweep_costs.read_sweep_costs("p")
    assert list(table["notebook"]) == ["04_y"] and pd.isna(table["seconds_per_config_example"].iloc[0])


def test_category_shares_add_up_to_the_chapters_time():
    costs = pd.DataFrame(
        {
            "notebook": ["a", "a", "a", "b"],
            "category": ["container", "decoding", "importance", "decoding"],
            "own_seconds": [1.0, 6.0, 2.0, 3.0],
            "seconds": [9.0, 6.0, 2.0, 3.0],
            "depth": [0, 1, 1, 0],
            "computed": [2, 2, 1, 0],
        }
    )
    shares = sweep_costs.category_shares(costs, total_seconds=20.0).set_index("category")
    assert shares.loc["decoding", "seconds"] == 9.0 and shares.loc["importance", "seconds"] == 2.0
    assert shares.loc["other", "seconds"] == 20.0 - 11.0  # the container's own second is in "other" too
    assert shares["share"].sum() == pytest.approx(1.0)
    totals = sweep_costs.chapter_totals(costs).set_index("notebook")
    assert totals.loc["a", "seconds"] == 9.0 and totals.loc["b", "read from the cache"] == 1
    assert list(sweep_costs.most_expensive(costs, 1)["notebook"]) == ["a"]
