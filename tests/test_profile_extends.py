"""A profile that extends another says only what changes; the rest is the other profile's."""

from __future__ import annotations

import pytest
import yaml

from helpers.book.profiles import load_profile
from helpers.book.profiles.profile import PROFILES, extended


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    """A profiles folder of the test's own, looked up before profiles/; returns a writer."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    monkeypatch.setenv("SIXTEEN_HEADS_PROFILES", str(folder))

    def write(name: str, text: str) -> None:
        (folder / f"{name}.yml").write_text(text)

    return write


def test_an_extending_profile_is_the_base_with_its_changes(profiles):
    profiles(
        "mine",
        "extends: smoke\n"
        "description: smoke, with five resamples more\n"
        "defaults:\n  n_resamples: 205\n"
        "notebooks:\n  03_ablating_one_head:\n    alpha: 0.05\n"
        "models:\n  nli:\n    seeds: [3]\n    fine_tune: {lr: 0.001}\n",
    )
    smoke, mine = load_profile("smoke"), load_profile("mine")
    assert mine.name == "mine" and mine.description == "smoke, with five resamples more"
    assert mine.defaults == {**smoke.defaults, "n_resamples": 205}
    assert list(mine.notebooks) == list(smoke.notebooks)  # the same chapters, in the same order
    assert mine.notebooks["03_ablating_one_head"] == {**smoke.notebooks["03_ablating_one_head"], "alpha": 0.05}
    assert {c: p for c, p in mine.notebooks.items() if c != "03_ablating_one_head"} == {
        c: p for c, p in smoke.notebooks.items() if c != "03_ablating_one_head"
    }
    nli, base = mine.models["nli"], smoke.models["nli"]
    assert nli["seeds"] == [3] and nli["fine_tune"] == {**base["fine_tune"], "lr": 0.001}
    assert {k: v for k, v in nli.items() if k not in ("seeds", "fine_tune")} == {
        k: v for k, v in base.items() if k not in ("seeds", "fine_tune")
    }
    assert {n: s for n, s in mine.models.items() if n != "nli"} == {
        n: s for n, s in smoke.models.items() if n != "nli"
    }


def test_a_chain_of_profiles_and_an_empty_extension(profiles):
    profiles("one", "extends: smoke\ndefaults:\n  n_resamples: 300\n")
    profiles("two", "extends: one\nnotebooks:\n  03_ablating_one_head:\n    alpha: 0.05\n")
    profiles("same", "extends: smoke\n")
    two, smoke = load_profile("two"), load_profile("smoke")
    assert two.defaults["n_resamples"] == 300 and two.notebooks["03_ablating_one_head"]["alpha"] == 0.05
    same = load_profile("same")
    assert (same.defaults, same.notebooks, same.models, same.description) == (
        smoke.defaults,
        smoke.notebooks,
        smoke.models,
        smoke.description,
    )


def test_the_extension_is_checked_like_any_profile(profiles):
    profiles("bad", "extends: smoke\nnotebooks:\n  03_ablating_one_head:\n    beam: five\n")
    with pytest.raises(SystemExit, match=r"bad\.yml: notebooks: 03_ablating_one_head: beam"):
        load_profile("bad")


@pytest.mark.parametrize(
    "files, message",
    [
        ({"bad": "extends: nosuch\n"}, r"bad\.yml: extends: unknown profile 'nosuch'; profiles are \[.*'smoke'"),
        ({"bad": "extends: [smoke]\n"}, r"bad\.yml: extends: the name of another profile"),
        ({"bad": "extends: bad\n"}, r"in a circle \(bad -> bad\)"),
        ({"bad": "extends: loop\n", "loop": "extends: bad\n"}, r"in a circle \(bad -> loop -> bad\)"),
        ({"bad": "extends: smoke\ndefaults: [1]\n"}, r"bad\.yml: defaults: a mapping of name: value"),
        ({"bad": "extends: base\n", "base": "defaults: [1]\n"}, r"base\.yml: defaults: a mapping of name: value"),
        ({"bad": "extends: base\n", "base": "nosuch: 1\n"}, r"base\.yml: unknown key\(s\) \['nosuch'\]"),
    ],
)
def test_a_bad_extension_is_refused_naming_the_file(profiles, files, message):
    for name, text in files.items():
        profiles(name, text)
    with pytest.raises(SystemExit, match=message):
        load_profile("bad")


def test_extended_changes_neither_mapping():
    base = yaml.safe_load((PROFILES / "smoke.yml").read_text())
    before = yaml.safe_load((PROFILES / "smoke.yml").read_text())
    child = {"models": {"nli": {"fine_tune": {"lr": 1.0}}}, "notebooks": {"03_ablating_one_head": {"alpha": 0.5}}}
    out = extended(base, child)
    assert base == before and child == {
        "models": {"nli": {"fine_tune": {"lr": 1.0}}},
        "notebooks": {"03_ablating_one_head": {"alpha": 0.5}},
    }
    assert out["models"]["nli"]["fine_tune"]["lr"] == 1.0


def test_the_readmes_example_profile_loads(profiles):
    import re

    readme = (PROFILES.parent / "README.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if b.startswith("extends: course"))
    profiles("mine", block)
    mine, course = load_profile("mine"), load_profile("course")
    assert mine.defaults["alpha"] == 0.05 and mine.models["nli"]["seeds"] == [0, 1, 2]
    assert mine.models["translation"] == course.models["translation"]


def test_a_profile_can_extend_the_shipped_one_of_its_own_name(profiles):
    profiles("smoke", "extends: smoke\ndefaults:\n  n_resamples: 207\n")
    assert load_profile("smoke").defaults["n_resamples"] == 207


def test_a_chapters_own_parameter_beats_a_default_of_the_extension(profiles):
    from helpers.book.profiles import parameters_for

    profiles("mine", "extends: course\ndefaults:\n  n_resamples: 500\n")
    mine = load_profile("mine")
    assert parameters_for(mine, "14b_served_at_equal_memory", {})["n_resamples"] == 10000  # course's own entry
    assert parameters_for(mine, "03_ablating_one_head", {})["n_resamples"] == 500
