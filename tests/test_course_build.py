"""The model build on the smoke profile: trains, saves, reloads to the same scores, reuses its
cache, resumes an interrupted translation run exactly, and writes models.json."""

import dataclasses
import json
import time

import pytest
import torch

from helpers.book import course
from helpers.book.profiles import Profile, load_profile
from helpers.heads import metrics
from helpers.zoo.classifier_training import predict
from helpers.zoo.translation_model import TranslationConfig, model_for, train, translate


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path_factory.mktemp("models")))
    profile = load_profile("smoke")
    t0 = time.perf_counter()
    summary = course.build(profile, progress=False, processes=1)  # in this process: the resume test compares bits
    summary["test_seconds"] = time.perf_counter() - t0
    yield profile, summary
    mp.undo()


def test_every_model_is_built_with_scores_on_every_split(smoke):
    profile, summary = smoke
    specs = course.model_specs(profile)
    assert set(summary["models"]) == set(specs)
    assert {"nli@0", "nli@1", "translation@0", "translation@1", "sentiment"} <= set(
        specs
    )  # seeds, as the profile says
    for name, record in summary["models"].items():
        splits = set(specs[name]["sizes"]) - {"train"}
        assert set(record["scores"]) == splits
        assert record["train_seconds"] > 0 and record["machine"]
        assert not record["reused_from_cache"]
    from helpers.book.store.results import results_dir

    written = json.loads((results_dir("smoke") / "models.json").read_text())
    assert written["models"].keys() == summary["models"].keys()
    machine = written["machine"]
    assert machine["cpus"] >= 1 and machine["torch_threads"] >= 1 and machine["cpu_model"]
    assert machine["torch"] == torch.__version__.split("+")[0] or machine["torch"] == torch.__version__
    assert machine["transformers"] != "not installed" and machine["fairseq"] != "not installed"


def test_seeds_train_different_models_on_the_same_data(smoke):
    profile, summary = smoke
    first, second = (course.load_classifier(profile, f"nli@{s}")[0] for s in (0, 1))
    assert any(not torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
    assert course.load_data(profile, "nli@0") == course.load_data(profile, "nli@1")
    assert course.load_data(profile, "translation@0") == course.load_data(profile, "translation@1")
    losses = [[h["train_loss"] for h in summary["models"][f"translation@{s}"]["epochs"]] for s in (0, 1)]
    assert losses[0] != losses[1]


def test_a_second_build_reuses_the_cache(smoke):
    profile, summary = smoke
    t0 = time.perf_counter()
    again = course.build(profile, progress=False)
    assert all(r["reused_from_cache"] for r in again["models"].values())
    assert time.perf_counter() - t0 < summary["test_seconds"]
    for name in summary["models"]:
        assert again["models"][name]["scores"] == summary["models"][name]["scores"]


def test_changed_settings_get_a_new_cache_folder(smoke):
    profile, _ = smoke
    other = dataclasses.replace(profile, models=json.loads(json.dumps(profile.models)))
    other.models["nli"]["fine_tune"]["lr"] = 2e-3
    assert course.model_dir(other, "nli") != course.model_dir(profile, "nli")
    assert course.model_dir(other, "sentiment") == course.model_dir(profile, "sentiment")


def test_a_built_model_loads_through_the_registry_and_not_the_paper_readers(smoke, monkeypatch):
    from helpers.zoo import needs, paper_sources, registry

    profile, _ = smoke

    def refuse(*args, **kwargs):
        raise AssertionError("a course model must not be read through the paper profile's readers")

    for module, names in (
        (paper_sources, ("resolve_model", "load_fairseq_archive", "load_splits", "read_glue")),
        (needs, ("needs", "check_local")),
    ):
        for name in names:
            monkeypatch.setattr(module, name, refuse)
    loaded = []
    real = registry.load_model
    monkeypatch.setattr(
        registry, "load_model", lambda ref, **kw: loaded.append(registry.source_of(ref).name) or real(ref, **kw)
    )
    course.load_classifier(profile, "nli")
    course.load_translation(profile)
    course.load_translation(profile, epoch=1)
    assert loaded == ["trained"] * 3


@pytest.mark.parametrize("name", ["nli", "acceptability", "paraphrase"])
def test_a_reloaded_classifier_scores_the_same(smoke, name):
    profile, summary = smoke
    record = summary["models"][course.resolve(profile, name)]
    model, tokenizer = course.load_classifier(profile, name)
    data = course.load_data(profile, name)
    for split, scores in record["scores"].items():
        pred = predict(model, tokenizer, examples=data[split], max_length=profile.max_length(name))
        gold = [e.label for e in data[split]]
        assert metrics.METRICS[record["metric"]](pred, gold) == pytest.approx(scores[record["metric"]], abs=1e-12)


def test_translation_keeps_every_epoch_and_reloads_to_the_same_bleu(smoke):
    profile, summary = smoke
    record = summary["models"][course.resolve(profile, "translation")]
    spec = profile.models["translation"]
    epochs = spec["train"]["epochs"]
    assert [h["epoch"] for h in record["epochs"]] == list(range(1, epochs + 1))
    for epoch in range(1, epochs + 1):
        assert course.load_translation(profile, epoch=epoch) is not None
    with pytest.raises(FileNotFoundError, match="has epochs"):
        course.load_translation(profile, epoch=epochs + 5)
    model = course.load_translation(profile)
    data = course.load_data(profile, "translation")
    hyps = translate(model, [p.src for p in data["test13"]], beam=spec["beam"])
    assert all(isinstance(h, str) for h in hyps)
    score, signature = metrics.bleu(hyps, [p.ref for p in data["test13"]])
    assert score == pytest.approx(record["scores"]["test13"]["bleu"], abs=1e-9)
    assert "tok:none" in signature and signature == record["bleu_signature"]


def test_an_interrupted_translation_run_resumes_exactly(tmp_path):
    from helpers.zoo.translation_task import generate

    data = generate({"train": 40, "valid": 8}, seed=5)
    config = TranslationConfig(layers=1, heads=2, embed_dim=8, ffn_dim=16, epochs=3, max_tokens=200, warmup_updates=3)
    train_pairs, valid_pairs = data["train"], data["valid"]

    straight = model_for(data["train"], config)
    history = train(
        straight, train_pairs, valid_pairs=valid_pairs, config=config, directory=tmp_path / "straight", progress=False
    )

    interrupted = model_for(data["train"], config)
    train(
        interrupted,
        train_pairs,
        valid_pairs=valid_pairs,
        config=dataclasses.replace(config, epochs=2),
        directory=tmp_path / "resumed",
        progress=False,
    )
    resumed = model_for(data["train"], config)  # a fresh process: weights come from last.pt
    history_resumed = train(
        resumed, train_pairs, valid_pairs=valid_pairs, config=config, directory=tmp_path / "resumed", progress=False
    )

    assert [h["train_loss"] for h in history_resumed] == [h["train_loss"] for h in history]
    for (k, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), k
    assert sorted(p.name for p in (tmp_path / "resumed").iterdir()) == [
        "checkpoint1",
        "checkpoint2",
        "checkpoint3",
        "last.pt",
    ]


def test_a_left_over_partial_folder_is_rebuilt_cleanly(smoke, tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path))
    profile, _ = smoke
    final = course.model_dir(profile, "sentiment")
    partial = final.with_name(final.name + ".partial")
    (partial / "model").mkdir(parents=True)
    (partial / "model" / "model.safetensors").write_bytes(b"truncated")
    record = course.build_one(profile, "sentiment", progress=False)
    assert (final / "record.json").exists() and not partial.exists()
    assert set(record["scores"]) == {"valid"}


def test_unknown_model_or_task_is_refused(smoke):
    profile, _ = smoke
    with pytest.raises(KeyError, match="has no model"):
        course.model_dir(profile, "mnli")
    bad = dataclasses.replace(profile, models={"x": {"task": "qqp"}})
    with pytest.raises(ValueError, match="the tasks are"):
        course.model_specs(bad)


def test_an_interrupted_build_resumes_from_its_partial_folder(smoke, tmp_path, monkeypatch):
    """Epoch 1 left in <folder>.partial by a killed build is kept; the build trains only epoch 2
    and ends with the same weights as an uninterrupted build."""

    from helpers.zoo.recipes import generate_data

    profile, summary = smoke
    run = course.resolve(profile, "translation")
    spec = course.model_specs(profile)[run]
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path))
    final = course.model_dir(profile, "translation")
    data = generate_data(spec)
    config = TranslationConfig(**spec["train"])
    first = train(
        model_for(data["train"], config),
        data["train"],
        valid_pairs=data["valid"],
        config=dataclasses.replace(config, epochs=1),
        directory=final.with_name(final.name + ".partial") / "checkpoints",
        progress=False,
    )

    record = course.build_one(profile, "translation", progress=False)
    assert record["epochs"][0] == first[0]
    assert record["scores"] == summary["models"][run]["scores"]
    resumed = course.load_translation(profile)
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", summary["models"][run]["path"].rsplit("/", 1)[0])
    straight = course.load_translation(profile)
    for (k, a), (_, b) in zip(resumed.state_dict().items(), straight.state_dict().items()):
        assert torch.equal(a, b), k


def test_prune_keeps_current_models_and_resumable_partials(smoke, tmp_path, monkeypatch):
    profile, _ = smoke
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path))
    current = course.model_dir(profile, "nli")
    for d in (
        current,
        current.with_name(current.name + ".partial"),
        tmp_path / "nli-0123456789ab",
        tmp_path / "sentiment-0123456789ab.partial",
    ):
        d.mkdir()
    assert course.stale_folders([profile]) == [
        tmp_path / "nli-0123456789ab",
        tmp_path / "sentiment-0123456789ab.partial",
    ]


def test_seeds_expand_into_one_model_per_training_seed():
    profile = Profile(
        "t",
        models={
            "nli": {
                "task": "nli",
                "encoder": "tiny-bert",
                "sizes": {"train": 8},
                "seeds": [0, 3],
                "fine_tune": {"lr": 1e-3},
            },
            "translation": {"task": "translation", "sizes": {"train": 8}, "seeds": [5], "train": {"epochs": 1}},
            "sentiment": {"task": "sentiment", "encoder": "tiny-bert", "sizes": {"train": 8}},
        },
    )
    specs = course.model_specs(profile)
    assert set(specs) == {"nli@0", "nli@3", "translation@5", "sentiment"}
    assert specs["nli@3"]["fine_tune"] == {"lr": 1e-3, "seed": 3} and "seeds" not in specs["nli@3"]
    assert specs["translation@5"]["train"] == {"epochs": 1, "seed": 5}
    assert course.training_seeds(profile, "nli") == [0, 3] and course.training_seeds(profile, "sentiment") == [0]
    assert course.seed_runs(profile, "nli") == [(0, "nli@0"), (3, "nli@3")]
    assert course.seed_runs(profile, "nli", limit=1) == [(0, "nli@0")]
    assert course.seed_runs(profile, "sentiment") == [(0, "sentiment")]
    # the bare name is the first seed's run; runs of different seeds live in different folders
    assert course.model_dir(profile, "nli") == course.model_dir(profile, "nli@0") != course.model_dir(profile, "nli@3")
    for bad in ([], [1, 1], "0,1", [0.5]):
        with pytest.raises(ValueError, match="distinct integers"):
            course.model_specs(Profile("t", models={"nli": {**profile.models["nli"], "seeds": bad}}))
    with pytest.raises(ValueError, match="drop its `seeds`"):
        course.model_specs(Profile("t", models={"nli": {**profile.models["nli"], "checkpoint": "x"}}))


def test_models_build_in_two_one_thread_processes_on_a_two_core_cpu(smoke, tmp_path, monkeypatch, capsys):
    """The default on this Linux CPU of 2+ cores: two spawned processes of one thread each; each
    model is the one a one-thread build in this process makes, bit for bit."""
    from helpers.base.cores import usable_cores

    monkeypatch.delenv(course.BUILD_PROCESSES_ENV, raising=False)
    assert course.build_processes() == (2 if usable_cores() >= 2 else 1)
    monkeypatch.setenv(course.BUILD_PROCESSES_ENV, "3")
    assert course.build_processes() == 3
    monkeypatch.setenv(course.BUILD_PROCESSES_ENV, "zero")
    with pytest.raises(ValueError, match="must be a whole number >= 1"):
        course.build_processes()
    profile, _ = smoke
    names = ["sentiment", "paraphrase"]
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "spawned"))
    built = course.build(profile, only=names, progress=True, processes=2)
    err = capsys.readouterr().err
    assert "building 2 models in 2 processes of one thread each" in err and "[2/2]" in err
    assert all(not r["reused_from_cache"] for r in built["models"].values())
    spawned = {n: course.load_classifier(profile, n)[0].state_dict() for n in names}
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "here"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name in names:
            course.build_one(profile, name, progress=False)
            here = course.load_classifier(profile, name)[0].state_dict()
            assert all(torch.equal(here[k], spawned[name][k]) for k in here), name
    finally:
        torch.set_num_threads(threads)


def test_the_build_trains_the_weight_decay_ablation_and_records_it(smoke):
    """`make models` trains chapter 02's three arms (zoo/decay_ablation.py) from the translation
    model's first run, the profile's epochs each, and records every epoch's head norms; the arms
    differ only where weight decay enters Adam, and a second build reuses them."""
    from helpers.book.chapters.ch02_course_models import decay_ablation, decay_ablation_line
    from helpers.book.course.building import profile_decay_arms
    from helpers.zoo import decay_ablation as ablation

    profile, summary = smoke
    arms = profile_decay_arms(profile)
    assert sorted(summary["ablations"]) == sorted(arms) == sorted(f"translation~decay-{a}" for a in ablation.ARMS)
    first_run = course.model_specs(profile)["translation@0"]
    for name, (spec, _) in arms.items():
        record = summary["ablations"][name]
        assert [e["epoch"] for e in record["epochs"]] == [1, 2]  # smoke.yml: decay_ablation_epochs: 2
        assert set(record["epochs"][0]["head_norms"]) == {"enc_self", "enc_dec", "dec_self"}
        assert "competence" not in spec and spec["sizes"] == first_run["sizes"]
        assert {k: v for k, v in spec["train"].items() if k not in ("decay", "weight_decay", "epochs")} == {
            k: v for k, v in first_run["train"].items() if k != "epochs"
        }
    assert arms["translation~decay-coupled"][0]["train"]["decay"] == "coupled"
    assert arms["translation~decay-none"][0]["train"]["weight_decay"] == 0.0
    table = decay_ablation(profile, epochs=2)  # reads the built arms, trains nothing
    assert len(table) == 6 and set(table["arm"]) == set(ablation.ARMS) and (table["heads"] == 24).all()
    assert (table["dead"] == table[["dead enc_self", "dead enc_dec", "dead dec_self"]].sum(1)).all()
    line = decay_ablation_line(table)  # each arm: its kinds, then the counts at the floors around, once
    assert line.count("with a floor of 0.3% or 3%") == 3 and "below 0.3%" not in line
    assert all(
        r["reused_from_cache"] for r in course.build(profile, progress=False, processes=1)["ablations"].values()
    )


def test_an_arm_is_named_and_sized_with_a_clear_error():
    from helpers.zoo.decay_ablation import arm_spec

    with pytest.raises(ValueError, match="unknown arm 'adamw'.*the arms are"):
        arm_spec({"train": {}}, "adamw", 3)
    with pytest.raises(ValueError, match="at least 1 epoch"):
        arm_spec({"train": {}}, "coupled", 0)
