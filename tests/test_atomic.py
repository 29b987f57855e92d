"""An interrupted write leaves the previous file untouched and no stray temporary file."""

import pytest

from helpers.base.atomic import atomic_path


def test_interrupted_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_text("half of the new")
            raise KeyboardInterrupt
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_finished_write_replaces_the_file(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old")
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]
