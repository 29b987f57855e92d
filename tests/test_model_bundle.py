"""Train once, teach many: a profile's models exported to one file and imported into another
clone's cache, checked by their hashes and competence rules first; and the laptop check."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from helpers.book.course import bundle
from helpers.book.running import laptop
from helpers.zoo import competence, model_cache


def _digests(folder):
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "sweeps" not in p.relative_to(folder).parts
    }


@pytest.fixture
def exported(smoke, tmp_path):
    """The smoke models exported from the session's cache: (archive, {folder name: digests})."""
    folders = bundle.profile_folders(smoke)
    planted = next(iter(folders.values())) / "sweeps" / "planted-by-test.bin"  # a sweep cache stays out
    planted.parent.mkdir(exist_ok=True)
    planted.write_bytes(b"a sweep of my own")
    archive = tmp_path / "smoke-models.tar"
    try:
        manifest = bundle.export(smoke, archive)
    finally:
        planted.unlink()
    assert not any("sweeps/" in name for name in manifest["files"])
    assert sorted(manifest["folders"]) == sorted(f.name for f in folders.values())
    return archive, {f.name: _digests(f) for f in folders.values()}


def test_a_bundle_puts_every_model_into_a_fresh_cache_bit_for_bit(exported, tmp_path, monkeypatch):
    archive, originals = exported
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "fresh"))
    lines = bundle.import_bundle(archive)
    assert not any("already" in line for line in lines)
    for name, digests in originals.items():
        folder = tmp_path / "fresh" / name
        assert model_cache.is_built(folder) and _digests(folder) == digests
        assert not (folder / "sweeps").exists()  # each student's sweeps are their own
    assert [p.name for p in (tmp_path / "fresh").iterdir() if p.name.startswith(".")] == []
    assert all("already in the cache" in line for line in bundle.import_bundle(archive))
    assert bundle.bundle_profile(archive) == "smoke" and bundle.next_step("smoke") == "make book PROFILE=smoke"
    assert bundle.next_step("lab").startswith("make lab-plan")  # what the teaching guide runs next


def _rewrite(archive, tmp_path, change):
    """A copy of ``archive`` with ``change(name, data) -> data`` applied to each member."""
    copy = tmp_path / "changed.tar"
    with tarfile.open(archive) as src, tarfile.open(copy, "w") as dst:
        for member in src.getmembers():
            data = change(member.name, src.extractfile(member).read())
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return copy


def test_a_changed_file_is_refused_before_the_cache_is_touched(exported, tmp_path, monkeypatch):
    archive, _ = exported
    victim = next(n for n in json.loads(tarfile.open(archive).extractfile("manifest.json").read())["files"])
    changed = _rewrite(archive, tmp_path, lambda name, data: data + b"x" if name == victim else data)
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "fresh"))
    with pytest.raises(bundle.BundleError, match=r"changed since export .*copy the bundle again"):
        bundle.import_bundle(changed)
    assert [p for p in (tmp_path / "fresh").iterdir()] == []


def test_a_bundle_of_another_recipe_says_to_check_out_the_teachers_commit(exported, tmp_path, monkeypatch):
    archive, _ = exported

    def other_recipe(name, data):
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        manifest["folders"][0] = manifest["folders"][0][:-4] + "0000"
        return json.dumps(manifest).encode()

    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "fresh"))
    with pytest.raises(bundle.BundleError, match="another recipe or training code.*Check out the commit"):
        bundle.import_bundle(_rewrite(archive, tmp_path, other_recipe))


def test_a_model_below_its_competence_floor_is_refused(exported, smoke, tmp_path, monkeypatch):
    archive, _ = exported
    records = [model_cache.read_record(f) for f in bundle.profile_folders(smoke).values()]
    split_of = {r["task"]: next(iter(r["scores"])) for r in records if "scores" in r}  # the arms have none
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "fresh"))

    def strict(spec):  # the smoke models state no rule: give each one that no model meets
        return competence.Competence(split=split_of[spec["task"]], at_least=1e9)

    monkeypatch.setattr(competence, "rule_of", strict)
    with pytest.raises(bundle.BundleError, match=r"fails its competence rule on \w+: at least 1e\+09"):
        bundle.import_bundle(archive)
    assert [p for p in (tmp_path / "fresh").iterdir()] == []


def test_export_refuses_while_a_model_is_not_built(smoke, tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "empty"))
    with pytest.raises(bundle.BundleError, match="not built yet.*make models PROFILE=smoke"):
        bundle.export(smoke, tmp_path / "x.tar")
    assert not (tmp_path / "x.tar").exists()


def test_a_file_that_is_not_a_bundle_is_named(tmp_path):
    plain = tmp_path / "plain.tar"
    with tarfile.open(plain, "w") as tar:
        tar.add(__file__, arcname="something.py")
    with pytest.raises(bundle.BundleError, match="no manifest.json"):
        bundle.import_bundle(plain)


def test_the_laptop_check_says_what_to_do():
    assert laptop.check_python((3, 11, 7))[0] == "ok"
    level, _, _, todo = laptop.check_python((3, 10, 12))
    assert level == "FAILED" and "make setup" in todo
    assert laptop.check_python((3, 11, 3))[0] == "FAILED"  # below the floor pyproject.toml states
    missing = laptop.check_environment(laptop.REPO / "no-such-venv")
    assert [line[0] for line in missing] == ["TODO"] and "make setup" in missing[0][3]
    # before setup the check says what to do and passes; a FAILED line fails it
    assert "once you do the TODO above: environment" in laptop.verdict([laptop.check_python((3, 11, 7)), *missing])
    assert laptop.verdict([laptop.check_python((3, 10, 12)), *missing]).startswith("this machine cannot run the lab")
    assert laptop.PYTHON_FLOOR == (3, 11, 4) and laptop.TORCH.count(".") == 2
    text = laptop.report([("ok", "Python", "3.11.7", ""), ("WARN", "memory", "4 GiB", "close other programs")])
    assert "WARN    memory  4 GiB\n" in text and "-> close other programs" in text


def test_the_laptop_check_passes_on_this_machines_environment():
    lines = laptop.check_environment(laptop.REPO / ".venv")
    assert {name.split(" ")[0]: level for level, name, _, _ in lines}["torch"] == "ok", lines
    assert laptop.main(["--profile", "smoke"]) == 0  # set up as `make test` sets it up: nothing FAILED
