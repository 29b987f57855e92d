"""The competence rule: a run below its model's floor is rejected and trained
again with the next seed, the record lists it, an interrupted retry resumes with the seed it was
on, and a recipe that no seed rescues stops the build with a message that says so."""

import json

import pytest

from helpers.book import course
from helpers.book.profiles import load_profile
from helpers.zoo import competence, model_cache
from helpers.zoo.competence import Competence, IncompetentModel, rule_of


def test_the_floor_lies_the_stated_share_of_the_way_from_baseline_to_ceiling():
    accuracy = {"accuracy": 0.7, "baseline": 0.5}
    assert Competence("valid", reach=0.5).floor(accuracy, "accuracy") == pytest.approx(0.75)
    bleu = {"bleu": 16.0, "baseline": 1.0, "oracle_bleu": 46.0}  # BLEU's ceiling: the second translator's
    assert Competence("test13", reach=1 / 3).floor(bleu, "bleu") == pytest.approx(16.0)
    assert Competence("test13", at_least=19.5).floor(bleu, "bleu") == 19.5
    assert Competence("test13", reach=1 / 3, at_least=12.0).floor(bleu, "bleu") == pytest.approx(16.0)  # the higher


@pytest.mark.parametrize(
    "given, message",
    [
        ({"reach": 0.5}, "give `split`"),
        ({"split": "valid"}, "and/or `at_least`"),
        ({"split": "valid", "reach": 0.5, "minimum": 3}, "unknown keys"),
        ({"split": "valid", "reach": 50}, "0 to 1"),
        ({"split": "valid", "reach": 0.5, "tries": 0}, "at least 1"),
    ],
)
def test_a_malformed_rule_is_refused_with_what_to_write(given, message):
    with pytest.raises(ValueError, match=message):
        rule_of({"competence": given})


def test_a_spec_without_a_rule_keeps_any_run():
    assert rule_of({"task": "nli"}) is None


def _spec(tries: int = 3, floor: float = 0.75) -> dict:
    return {
        "task": "translation",
        "corpus": "generated",
        "sizes": {"train": 8, "valid": 4},
        "train": {"seed": 1},
        "competence": {"split": "valid", "at_least": floor, "tries": tries},
    }


_ALIVE = {"enc_self": [[1.0, 0.8], [0.9, 1.2]]}  # |V_h|·|O_h| of a run whose heads all live
_ONE_DEAD = {"enc_self": [[1.0, 0.8], [0.9, 1e-4]]}  # ... and of one whose head 1 of layer 1 died


def _fake_training(
    scores: dict[int, float], calls: list[int], interrupt_at: int | None = None, norms: dict[int, dict] | None = None
):
    """A stand-in for model_cache._train that scores each seed as given (and can be killed);
    ``norms``: the head norms of a seed's run (every head alive where not given)."""

    def train(spec, data, partial, progress, log):
        seed = spec["train"]["seed"]
        calls.append(seed)
        if seed == interrupt_at:
            raise KeyboardInterrupt
        (partial / "model").mkdir(parents=True, exist_ok=True)
        return {
            "metric": "bleu",
            "train_seconds": 1.0,
            "epochs": [],
            "scores": {"valid": {"bleu": scores[seed], "baseline": 0.0}},
            "head_norms": (norms or {}).get(seed, _ALIVE),
        }

    return train


def test_a_failed_seed_is_rejected_and_retrained_with_the_next(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(model_cache, "_train", _fake_training({1: 0.5, 1001: 0.9}, calls))
    record = model_cache.build_into(_spec(), "m@1", tmp_path / "m@1-abc", progress=False)
    assert calls == [1, 1001]
    assert record["trained_seed"] == 1001 and record["spec"]["train"]["seed"] == 1  # the slot keeps its seed
    assert record["rejected"] == [
        {
            "seed": 1,
            "split": "valid",
            "score": 0.5,
            "floor": 0.75,
            "dead_heads": [],
            "passed": False,
            "train_seconds": 1.0,
        }
    ]
    assert json.loads((tmp_path / "m@1-abc" / "record.json").read_text())["rejected"][0]["seed"] == 1
    assert not (tmp_path / "m@1-abc" / "rejected.json").exists()


def test_a_run_that_passes_at_once_rejects_nothing(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(model_cache, "_train", _fake_training({1: 0.75}, calls))  # the floor itself passes
    record = model_cache.build_into(_spec(), "m@1", tmp_path / "m@1-abc", progress=False)
    assert calls == [1] and record["rejected"] == [] and record["trained_seed"] == 1


def test_a_run_with_a_dead_head_is_rejected_whatever_it_scores(tmp_path, monkeypatch):
    """Every head must be alive (heads/liveness.py): a run that scores above its floor but whose
    training zeroed a head is rejected and names the head; a recipe that kills heads on every
    seed stops the build."""
    calls: list[int] = []
    training = _fake_training({1: 0.9, 1001: 0.9}, calls, norms={1: _ONE_DEAD})
    monkeypatch.setattr(model_cache, "_train", training)
    record = model_cache.build_into(_spec(), "m@1", tmp_path / "m@1-abc", progress=False)
    assert calls == [1, 1001] and record["trained_seed"] == 1001
    assert record["rejected"][0]["dead_heads"] == ["enc_self 1.1"] and record["rejected"][0]["score"] == 0.9
    monkeypatch.setattr(
        model_cache, "_train", _fake_training({1: 0.9, 1001: 0.9}, [], norms=dict.fromkeys((1, 1001), _ONE_DEAD))
    )
    with pytest.raises(IncompetentModel, match=r"seed 1: 0\.900 with 1 dead heads"):
        model_cache.build_into(_spec(tries=2), "m@1", tmp_path / "m@1-def", progress=False)


def test_an_interrupted_retry_resumes_with_the_seed_it_was_on(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(
        model_cache, "_train", _fake_training({1: 0.1, 1001: 0.2, 2001: 0.9}, calls, interrupt_at=2001)
    )
    with pytest.raises(KeyboardInterrupt):
        model_cache.build_into(_spec(), "m@1", tmp_path / "m@1-abc", progress=False)
    assert [r["seed"] for r in json.loads((tmp_path / "m@1-abc.partial" / "rejected.json").read_text())] == [1, 1001]
    calls.clear()
    monkeypatch.setattr(model_cache, "_train", _fake_training({2001: 0.9}, calls))
    record = model_cache.build_into(_spec(), "m@1", tmp_path / "m@1-abc", progress=False)
    assert calls == [2001] and [r["seed"] for r in record["rejected"]] == [1, 1001]


def test_a_recipe_no_seed_rescues_stops_the_build_and_says_so(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(model_cache, "_train", _fake_training({1: 0.1, 1001: 0.2}, calls))
    with pytest.raises(IncompetentModel, match=r"every seed tried .*seed 1: 0\.100, seed 1001: 0\.200.*the recipe"):
        model_cache.build_into(_spec(tries=2), "m@1", tmp_path / "m@1-abc", progress=False)
    assert calls == [1, 1001] and not (tmp_path / "m@1-abc").exists()


def test_a_real_classifier_is_retrained_with_new_seeds(tmp_path, monkeypatch):
    """The seed reaches the trainer: an unreachable floor (accuracy 2) rejects two real runs of
    the smoke sentiment model, whose seeds and scores the error lists."""
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path))
    profile = load_profile("smoke")
    spec = {**course.model_specs(profile)["sentiment"], "competence": {"split": "valid", "at_least": 2.0, "tries": 2}}
    with pytest.raises(IncompetentModel, match=r"seed 0: 0\.\d+, seed 1000: 0\.\d+"):
        model_cache.build_into(spec, "sentiment", tmp_path / "sentiment-x", progress=False)
    rejected = json.loads((tmp_path / "sentiment-x.partial" / "rejected.json").read_text())
    assert [r["seed"] for r in rejected] == [0, 1000] and all(0 <= r["score"] <= 1 for r in rejected)


def test_retries_never_reuse_another_runs_seed():
    assert competence.retry_seeds(1, 3) == [1, 1001, 2001]
    assert set(competence.retry_seeds(0, 3)).isdisjoint(competence.retry_seeds(1, 3))


def test_chapter_02_lists_each_runs_rule_score_and_the_runs_it_replaced():
    from helpers.book.chapters import ch02_course_models as models_table

    def record(seed, score, rejected=()):
        return {
            "task": "sentiment",
            "metric": "accuracy",
            "spec": {"task": "sentiment", "competence": {"split": "valid", "reach": 0.5}},
            "scores": {"valid": {"accuracy": score, "baseline": 0.5}},
            "trained_seed": seed,
            "rejected": list(rejected),
            "train_seconds": 60.0,
            "head_norms": _ALIVE,
        }

    records = {
        "sentiment@0": record(0, 0.9),
        "sentiment@1": record(
            1001, 0.8, [{"seed": 1, "score": 0.7, "floor": 0.75, "passed": False, "train_seconds": 30.0}]
        ),
    }
    runs = {"sentiment": [(0, "sentiment@0"), (1, "sentiment@1")]}
    table = models_table.competence(records, runs)
    assert table["floor"].tolist() == [0.75, 0.75] and table["passes"].tolist() == [True, True]
    assert table["trained_with_seed"].tolist() == [0, 1001] and table["rejected_minutes"].tolist() == [0.0, 0.5]
    assert models_table.competence_line(table) == (
        "2 of 2 runs with a rule pass it; rejected and trained again with a new seed: sentiment seed 1 "
        "(rejected: seed 1 0.700; kept: seed 1001, 0.800)"
    )
    assert "0.5 min more on the 1 rejected runs" in models_table.machine_lines(
        {run: {**r, "bleu_signature": ""} for run, r in records.items()},
        {"cpu_model": "x", "cpus": 2, "torch_threads": 1, "torch": "t", "transformers": "t", "fairseq": "f"},
    )
    bare = {run: {**r, "spec": {"task": "sentiment"}} for run, r in records.items()}
    assert models_table.competence_line(models_table.competence(bare, runs)).startswith("no run of this profile has")


@pytest.mark.parametrize("name", ["course", "lab"])
def test_every_model_the_course_and_lab_profiles_train_has_a_rule(name):
    """The profiles a class or a reader builds study trained models only: each carries a rule
    (the smoke profile's tiny models and the paper's archives carry none)."""
    specs = course.model_specs(load_profile(name))
    assert specs, f"profile {name} trains no model"
    assert {model: rule_of(spec) is not None for model, spec in specs.items()} == dict.fromkeys(specs, True)
    assert all(rule_of(spec) is None for spec in course.model_specs(load_profile("smoke")).values())


def test_a_run_without_head_norms_is_refused_not_passed():
    from helpers.zoo.competence import judge, rule_of

    rule = rule_of({"competence": {"split": "valid", "at_least": 1.0}})
    record = {"metric": "bleu", "scores": {"valid": {"bleu": 5.0, "baseline": 0.0}}}
    with pytest.raises(ValueError, match="needs its head_norms"):
        judge(rule, record, 0)
    assert judge(rule, {**record, "head_norms": _ALIVE}, 0).dead == ()
