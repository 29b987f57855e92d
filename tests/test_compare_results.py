"""The results comparison sorts tables by what changed, and fails on a real change."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.book.scorecard.compare_builds import compare_verdicts, main
from helpers.book.store.compare import compare_folders, compare_tables


def _table(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns)


def test_same_table_is_equal_nan_included():
    a = _table(head=[1, 2], score=[0.5, float("nan")], kind=["self", "self"])
    assert compare_tables("t.csv", a, a.copy()).outcome == "equal"


def test_float32_rounding_is_told_apart_from_a_change():
    a = _table(score=[1.0, 2.0])
    rounded = compare_tables("t.csv", a, _table(score=[1.0 + 3e-7, 2.0]))
    assert rounded.outcome == "rounding" and rounded.columns == ("score",)
    assert 2e-7 < rounded.largest < 4e-7
    changed = compare_tables("t.csv", a, _table(score=[1.001, 2.0]))
    assert changed.outcome == "different" and changed.columns == ("score",)


def test_a_changed_word_or_shape_is_different():
    assert compare_tables("t.csv", _table(v=["reproduced"]), _table(v=["partly"])).outcome == "different"
    assert compare_tables("t.csv", _table(v=[1]), _table(v=[1, 2])).outcome == "different"
    assert compare_tables("t.csv", _table(v=[1]), _table(w=[1])).outcome == "different"


def test_timing_is_listed_not_compared():
    assert compare_tables("run_times.csv", _table(s=[1.0]), _table(s=[2.0])).outcome == "timing"
    a = _table(setup=["ref"], **{"tokens per second": [240.0], "ppl": [19.8]})  # as in 13_memory
    b = _table(setup=["ref"], **{"tokens per second": [250.0], "ppl": [19.8]})
    assert compare_tables("13_memory.csv", a, b).outcome == "timing"
    b2 = _table(setup=["ref"], **{"tokens per second": [250.0], "ppl": [19.9]})
    assert compare_tables("13_memory.csv", a, b2).outcome == "different"
    assert compare_tables("07_precision.csv", _table(median=[1.0]), _table(median=[1.1])).outcome == "timing"


def test_a_value_gone_missing_is_an_infinite_difference():
    gone = compare_tables("t.csv", _table(v=[1.0, 2.0]), _table(v=[1.0, float("nan")]))
    assert gone.outcome == "different" and gone.largest == float("inf")


def test_folders_and_exit_code(tmp_path, capsys):
    before, after = tmp_path / "before", tmp_path / "after"
    for folder in (before, after):
        folder.mkdir()
        _table(x=[1, 2]).to_csv(folder / "same.csv", index=False)
    _table(x=[1]).to_csv(before / "gone.csv", index=False)
    outcomes = {r.name: r.outcome for r in compare_folders(before, after)}
    assert outcomes == {"gone.csv": "missing", "same.csv": "equal"}
    assert main([str(before), str(after)]) == 1
    (before / "gone.csv").unlink()
    assert main([str(before), str(after)]) == 0
    assert capsys.readouterr().out.endswith("1 equal\n")
    with pytest.raises(SystemExit, match="no such results folder"):
        main([str(before), str(tmp_path / "corse")])


def test_the_largest_difference_is_read_on_the_columns_named():
    a = _table(ppl=[1.0], **{"tokens per second": [100.0]})
    b = _table(ppl=[1.5], **{"tokens per second": [300.0]})
    out = compare_tables("13_memory.csv", a, b)
    assert out.outcome == "different" and out.columns == ("ppl",) and out.largest == 0.5


def test_verdicts_are_judged_on_both_folders_and_a_moved_one_fails(tmp_path, monkeypatch, capsys):
    from helpers.book.scorecard import card
    from helpers.book.verdicts.engine import Claim

    def half_or_more(results):
        share = float(results["t"]["share"].mean())
        return f"{share:.2f}", "reproduced" if share >= 0.5 else "not reproduced"

    claim = Claim("toy", "§0", "half", "0.5", "share >= 0.5", "00_toy", half_or_more)
    monkeypatch.setattr(card, "CLAIMS", [claim])
    before, after = tmp_path / "before", tmp_path / "after"
    for folder in (before, after):
        folder.mkdir()
        _table(share=[0.6]).to_csv(folder / "t.csv", index=False)
    assert main([str(before), str(after), "--verdicts"]) == 0
    assert "verdicts: 2 of 2 the same" in capsys.readouterr().out  # the metric and the likelihood (not measured)
    _table(share=[0.7]).to_csv(after / "t.csv", index=False)  # a number moved, its verdict did not
    moved = compare_verdicts(before, after).iloc[0]
    assert moved["same"] and (moved["before ours"], moved["after ours"]) == ("0.60", "0.70")
    _table(share=[0.4]).to_csv(after / "t.csv", index=False)
    assert main([str(before), str(after), "--verdicts"]) == 1
    assert "verdict   toy (" in capsys.readouterr().out
