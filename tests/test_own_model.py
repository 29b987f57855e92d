"""The two worked profiles of *Study your own model* (``profiles/own_classifier.yml`` and
``profiles/own_language_model.yml``) run through the book's own code on stand-ins in a local data
folder: a small BERT with MNLI-format files, and a small Llama with a GGUF file beside it."""

from __future__ import annotations

import shutil

import paper_standins
import pytest
import yaml

from helpers.book.profiles.parameters import declared_parameters
from helpers.book.profiles.profile import NOTEBOOKS, chapter_parameters, load_profile

LM_CHAPTERS = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb") if "language_model" in declared_parameters(p))


def test_one_key_names_the_language_model_of_every_chapter_that_studies_one():
    from helpers.book.chapters.ch12_unimportant_or_unmeasured import chapter_11_verses

    assert LM_CHAPTERS == [
        "02_course_models",
        "06_pruning_curves",
        "11_nine_heads",
        "13_what_removing_heads_buys",
        "13b_what_removing_heads_breaks",
        "14_memory_budget",
        "14b_served_at_equal_memory",
    ]
    own, course = load_profile("own_language_model"), load_profile("course")
    for chapter in LM_CHAPTERS:
        assert chapter_parameters(own, chapter)["language_model"] == "my-llama", chapter
        assert chapter_parameters(course, chapter)["language_model"] == "smollm2", chapter
    assert chapter_11_verses(own)["language_model"] == "my-llama"  # chapter 12 scores chapter 11's model
    assert own.models == course.models  # nothing else changes


@pytest.fixture
def own_data(tmp_path, monkeypatch):
    """A data folder holding what the two profiles name, and folders for results and models."""
    from helpers.zoo.registry import load_causal_lm
    from helpers.zoo.shipped import smollm2_gguf

    root = tmp_path / "data"
    paper_standins.write_tiny_bert(root / "my-encoder")
    paper_standins.write_glue(tmp_path / "glue")
    (root / "my-glue").mkdir()
    shutil.move(tmp_path / "glue" / "MNLI", root / "my-glue" / "MNLI")
    model, tokenizer = load_causal_lm("tiny-llama", seed=0)
    model.save_pretrained(root / "my-llama")
    tokenizer.save_pretrained(root / "my-llama")
    (root / "my-llama" / "model.gguf").symlink_to(smollm2_gguf())  # llama.cpp's tokenizer (chapters 13, 14b)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for key, value in {
        "SIXTEEN_HEADS_DATA": root,
        "SIXTEEN_HEADS_PROFILES": profiles,
        "SIXTEEN_HEADS_RESULTS": tmp_path / "results",
        "SIXTEEN_HEADS_CACHE": tmp_path / "cache",
    }.items():
        monkeypatch.setenv(key, str(value))
    return tmp_path


def _small(folder, name: str, extends: str, **changes) -> str:
    """A profile ``name`` in ``folder`` that extends ``extends`` with ``changes`` (sizes for seconds)."""
    (folder / f"{name}.yml").write_text(yaml.safe_dump({"extends": extends, **changes}))
    return name


def test_your_classifier_is_fine_tuned_from_its_folder_and_swept_by_chapter_03s_code(own_data):
    from helpers.book import course
    from helpers.book.experiments.sweeps import Bootstrap, HeadSweeps

    # a random 2-layer stand-in cannot reach the course's floor: it need only match the majority
    # class (the rule's floor lowered to the baseline, nothing else changed)
    name = _small(
        own_data / "profiles",
        "own-classifier-standin",
        "own_classifier",
        models={"nli": {"competence": {"split": "matched", "reach": 0.0}}},
    )
    settings = load_profile(name)
    ((_, run),) = course.seed_runs(settings, "nli")
    record = course.build_one(settings, run, progress=False)
    assert record["spec"]["encoder"] == "my-encoder" and record["sizes"] == {
        "train": 60,
        "matched": 30,
        "mismatched": 30,
    }
    sweeps = HeadSweeps(settings, bootstrap=Bootstrap(n_resamples=100, min_units=2))
    effects = sweeps.effects("nli", sweeps.data("nli")["matched"], configs="one_head")
    assert len(effects) == 2 * 4  # the stand-in's 2 layers x 4 heads, each masked alone


def test_your_language_model_runs_chapter_11_and_has_its_gguf(own_data):
    from helpers.book.running import runner
    from helpers.zoo.registry import tokenizer_gguf

    assert tokenizer_gguf("my-llama").name == "model.gguf"
    smoke = load_profile("smoke").notebooks["11_nine_heads"]
    name = _small(
        own_data / "profiles",
        "own-lm-standin",
        "own_language_model",
        defaults={"select_verses": 8, "report_verses": 8, "min_units": 2},
        notebooks={"11_nine_heads": smoke},
    )
    params = runner.parameters_for(load_profile(name), "11_nine_heads", {})
    assert params["language_model"] == "my-llama"
    path, _, _ = runner.run_notebook("11_nine_heads", params, output_dir=own_data / "executed")
    import nbformat

    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["sixteen_heads"]["parameters"]["language_model"] == "my-llama"
