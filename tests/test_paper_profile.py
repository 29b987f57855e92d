"""The paper profile, without network or GPU: its loaders on files in the published formats, its
offline errors, its sweeps split over processes, and every notebook end to end on tiny
stand-ins (tests/paper_standins.py) selected by the profile's own path parameters."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import paper_standins
import pytest
import torch
import yaml

from helpers.book.profiles import PROFILES, load_profile
from helpers.heads.metrics import bleu, merge_bpe
from helpers.zoo import nli_task, paper_sources
from helpers.zoo.registry import MissingDownloadError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def standin_data(tmp_path_factory) -> Path:
    return paper_standins.make_data(tmp_path_factory.mktemp("paper-data"))


@pytest.fixture
def data_root(standin_data, monkeypatch) -> Path:
    monkeypatch.setenv("SIXTEEN_HEADS_DATA", str(standin_data))
    return standin_data


# ---- readers ---------------------------------------------------------------------------------
def test_glue_files_read_back_the_examples_they_were_written_from(tmp_path):
    paper_standins.write_glue(tmp_path)
    mnli = paper_sources.read_glue("nli", tmp_path / "MNLI")
    written = nli_task.generate({"train": 60, "matched": 30, "mismatched": 30}, seed=1)
    for split in ("train", "matched", "mismatched"):
        assert [(e.premise, e.hypothesis, e.label) for e in mnli[split]] == [
            (e.premise, e.hypothesis, e.label) for e in written[split]
        ]
    cola = paper_sources.read_glue("acceptability", tmp_path / "CoLA")["valid"]
    mrpc = paper_sources.read_glue("paraphrase", tmp_path / "MRPC")["train"]
    assert len(cola) == 30 and {e.label for e in cola} == {0, 1}
    assert all(e.text_pair for e in mrpc)


def test_datasets_rows_written_as_glue_files_read_back_unchanged(tmp_path):
    from datasets import Dataset

    rows = {
        "nli": {
            "premise": ["a cat sleeps", "no dog runs"],
            "hypothesis": ["an animal sleeps", "a dog runs"],
            "label": [0, 2],
            "idx": [0, 1],
        },
        "sentiment": {"sentence": ["a fine film", "dull"], "label": [1, 0], "idx": [0, 1]},
        "acceptability": {"sentence": ["the cat sleeps .", "the cat sleep ."], "label": [1, 0], "idx": [0, 1]},
        "paraphrase": {
            "sentence1": ["he left", "she came"],
            "sentence2": ["he went away", "she left"],
            "label": [1, 0],
            "idx": [0, 1],
        },
    }
    for task, columns in rows.items():
        spec = paper_sources.GLUE[task]
        ds = Dataset.from_dict(columns)
        paper_sources.write_glue(task, {split: list(ds) for split in spec.files}, tmp_path / spec.folder)
        back = paper_sources.read_glue(task, tmp_path / spec.folder)["train"]
        assert [e.label for e in back] == columns["label"]
        first = columns.get("premise") or columns.get("sentence") or columns["sentence1"]
        assert [getattr(e, "premise", None) or e.text for e in back] == first


def test_unknown_glue_column_names_the_file(tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabel\nfine\t1\n")
    with pytest.raises(ValueError, match=r"train.tsv has no column 'sentence'"):
        paper_sources.read_glue_file("sentiment", tmp_path / "train.tsv")


def test_bpe_is_merged_back_into_moses_tokens(data_root):
    from sacremoses import MosesTokenizer

    prep = paper_sources.Preprocessor("en-fr", data_root / "wmt14.en-fr.joined-dict.transformer" / "bpecodes")
    text = "Les chiens du voisin n'aiment pas l'orage, dit-il."
    encoded = prep.target(text)
    assert "@@" in encoded  # the codes split some of these words
    assert merge_bpe(encoded) == MosesTokenizer(lang="fr").tokenize(text, return_str=True, aggressive_dash_splits=True)


def test_bleu_scores_words_not_subwords():
    assert bleu(["le chat@@ on dort ."], ["le chaton dort ."])[0] == pytest.approx(100.0)
    assert merge_bpe("no markers here") == "no markers here"


def test_archive_loads_the_weights_and_dictionaries_it_holds(data_root):
    folder = data_root / "wmt14.en-fr.joined-dict.transformer"
    model = paper_sources.load_fairseq_archive(folder)
    saved = torch.load(folder / "model.pt", map_location="cpu", weights_only=False)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, saved["model"][name]), name
    assert model.encoder.embed_tokens is model.decoder.embed_tokens  # --share-all-embeddings
    assert model.args.arch == "transformer_vaswani_wmt_en_de_big"
    assert len(model.encoder.dictionary) == len(open(folder / "dict.en.txt").readlines()) + 4


def test_the_archive_in_its_2018_format_loads_as_the_same_model(data_root, tmp_path):
    """The published WMT14 archive was written by fairseq in 2018 (``args`` only, fused attention
    projections, ``layer_norms.<i>``): loading it must upgrade it to the very model that the
    stand-in's current format holds."""
    folder = data_root / "wmt14.en-fr.joined-dict.transformer"
    paper_standins.write_2018_archive(folder, tmp_path / "2018")
    written = torch.load(tmp_path / "2018" / "model.pt", map_location="cpu", weights_only=False)
    assert "cfg" not in written and isinstance(written["args"].lr, float)
    assert any(k.endswith("self_attn.in_proj_weight") for k in written["model"])
    assert any(".layer_norms.2." in k for k in written["model"])
    current, old = (paper_sources.load_fairseq_archive(f) for f in (folder, tmp_path / "2018"))
    old_weights = old.state_dict()
    for name, tensor in current.state_dict().items():
        if not name.endswith(".version"):  # fairseq's format counter, not a weight (1 for old files)
            assert torch.equal(old_weights[name], tensor), name
    src, prev = torch.tensor([[5, 6, 7, 8, 2]]), torch.tensor([[2, 9, 10, 11]])
    assert torch.equal(old(src, torch.tensor([5]), prev)[0], current(src, torch.tensor([5]), prev)[0])


def test_checkpoint_labels_are_reordered_to_ours():
    from helpers.zoo.classifier_training import align_labels
    from helpers.zoo.registry import load_encoder

    model, tokenizer = load_encoder("tiny-bert", num_labels=3, seed=0)
    model.config.id2label = {0: "CONTRADICTION", 1: "entailment", 2: "Neutral"}
    batch = tokenizer(["a cat sleeps", "no dog runs"], return_tensors="pt")
    before = model(**batch).logits
    order = align_labels(model, nli_task.LABELS)
    after = model(**batch).logits
    assert order == [1, 2, 0]
    assert torch.allclose(after, before[:, order])
    assert model.config.id2label == {0: "entailment", 1: "neutral", 2: "contradiction"}
    assert align_labels(model, nli_task.LABELS, ["LABEL_0", "LABEL_1", "LABEL_2"]) == [0, 1, 2]


# ---- offline ---------------------------------------------------------------------------------
def test_paper_profile_offline_fails_fast_naming_every_download(tmp_path, monkeypatch, capsys):
    from helpers.book import course
    from helpers.book.running import downloads, runner

    monkeypatch.setenv("SIXTEEN_HEADS_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    assert runner.main(["--profile", "paper", "--output-dir", str(tmp_path / "out")]) == 1
    message = capsys.readouterr().err
    for item in (
        "GLUE MNLI",
        "GLUE CoLA",
        "GLUE SST-2",
        "GLUE MRPC",
        "test set wmt13 en-fr",
        "test set wmt14/full",
        "test set mtnt1.1/test",
        "fairseq model archive wmt14.en-fr.joined-dict.transformer",
        "prepare-iwslt14.sh",
        "Hugging Face model bert-base-uncased",
        "python -m helpers.book.running.downloads --profile paper download",
    ):
        assert item in message, item
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()  # nothing started
    with pytest.raises(MissingDownloadError, match="dev_matched.tsv"):
        course.build(load_profile("paper"), only=["nli"], progress=False)
    assert downloads.main(["--profile", "paper", "check"]) == 1


def test_a_chapter_is_refused_only_for_what_it_reads(tmp_path, monkeypatch, capsys):
    """Chapter 03 reads MNLI and the WMT model: a missing IWSLT corpus (chapter 09's) must not
    stop it; chapter 09 is refused for that corpus alone; chapter 02 reads every model."""
    from helpers.book.profiles.profile import models_read
    from helpers.book.running import runner

    monkeypatch.setenv("SIXTEEN_HEADS_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out = ["--output-dir", str(tmp_path / "out")]
    assert runner.main(["--profile", "paper", "--only", "03_ablating_one_head", *out]) == 1
    message = capsys.readouterr().err
    assert "GLUE MNLI" in message and "fairseq model archive" in message
    assert "prepare-iwslt14.sh" not in message and "GLUE CoLA" not in message
    assert runner.main(["--profile", "paper", "--only", "09_training_dynamics", *out]) == 1
    message = capsys.readouterr().err
    assert "prepare-iwslt14.sh" in message and "GLUE" not in message and "fairseq model archive" not in message
    paper = load_profile("paper")
    assert models_read(paper, "02_course_models") == list(paper.models)
    assert models_read(paper, "10_appendix_more_tasks") == ["acceptability", "sentiment", "paraphrase", "iwslt"]
    assert models_read(paper, "03_ablating_one_head", {"translation": "iwslt"}) == ["nli", "iwslt"]
    assert models_read(paper, "15_scorecard") == []


def test_a_hub_download_takes_only_the_pytorch_files(tmp_path, monkeypatch):
    import huggingface_hub

    from helpers.zoo.needs import needs, pytorch_files

    bert = [  # bert-base-uncased's repository
        ".gitattributes", "LICENSE", "README.md", "config.json", "coreml/fill-mask/float32_model.mlpackage/x.json",
        "flax_model.msgpack", "model.onnx", "model.safetensors", "pytorch_model.bin", "rust_model.ot",
        "tf_model.h5", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    ]  # fmt: skip
    chosen = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    assert pytorch_files(bert) == chosen
    assert pytorch_files(["config.json", "pytorch_model.bin", "tf_model.h5"]) == ["config.json", "pytorch_model.bin"]
    with pytest.raises(ValueError, match="no PyTorch weights"):
        pytorch_files(["config.json", "tf_model.h5"])
    monkeypatch.setenv("SIXTEEN_HEADS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    calls = []
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", lambda self, name, **kw: bert)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kw: calls.append(kw))
    need = next(n for n in needs(load_profile("paper").models) if n.what == "Hugging Face model bert-base-uncased")
    need.fetch()
    assert [c["allow_patterns"] for c in calls] == [chosen]
    assert "--include" in need.how and "*.safetensors" in need.how


def test_hub_model_offline_says_how_to_provide_it(tmp_path, monkeypatch):
    from helpers.zoo.registry import load_encoder

    monkeypatch.setenv("SIXTEEN_HEADS_DATA", str(tmp_path))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(
        MissingDownloadError, match=r"huggingface-cli download bert-base-uncased --include .* --local-dir data/"
    ):
        load_encoder("bert-base-uncased", num_labels=3)


def test_every_chapter_has_a_paper_configuration_with_its_gpu_time():
    text = (PROFILES / "paper.yml").read_text()
    profile = load_profile("paper")
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(profile.notebooks) == notebooks
    for name in notebooks[:11]:  # the chapters that compute; 12-14 read their results
        line = next(line for line in text.splitlines() if line.strip().startswith(f"{name}:"))
        assert re.search(r"#~ \d", line), f"{name}: no estimated GPU time in profiles/paper.yml"
    for name, spec in profile.models.items():
        assert "data" in spec, f"paper model {name} reads no real data"


# ---- sweeps over several processes ------------------------------------------------------------
SWEEP = """
import json, os, sys
import torch
from helpers.book.experiments import head_effects
from helpers.zoo import nli_task
from helpers.sweeps.ablation import one_head_configs
from helpers.book.experiments.head_effects import classifier_effects
from helpers.heads.significance import Bootstrap
from helpers.zoo.registry import load_encoder
fault = os.environ.get("SWEEP_FAULT", "")
if fault:  # this rank breaks inside its share: with an error, or dying without one
    def broken(*args, **kwargs):
        if fault == "die":
            os._exit(3)
        raise RuntimeError("injected fault in the sweep")
    head_effects.single_layer_sweep = broken
model, tokenizer = load_encoder("tiny-bert", num_labels=3, seed=0)
examples = nli_task.generate({"train": 1, "matched": 40, "mismatched": 1}, seed=0)["matched"]
df = classifier_effects(model, tokenizer, examples=examples, configs=one_head_configs(model),
                        bootstrap=Bootstrap(n_resamples=50, min_units=2), cache_dir=sys.argv[1], progress=False)
print(json.dumps(df[["kind", "layer", "heads", "score"]].astype(str).values.tolist()))
print("threads", torch.get_num_threads(), file=sys.stderr)
"""


def _sweep(cache: Path, rank: int | None, world: int = 2, timeout: str = "120", **env_extra) -> subprocess.Popen:
    env = {**os.environ, "SIXTEEN_HEADS_SHARD_TIMEOUT": timeout, "HF_HUB_OFFLINE": "1", **env_extra}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)
    env["SIXTEEN_HEADS_JOB_STARTED"] = str(time.time())  # as the runner sets it for a job's notebooks
    if rank is not None:
        env.update(RANK=str(rank), WORLD_SIZE=str(world))
    return subprocess.Popen(
        [sys.executable, "-c", SWEEP, str(cache)],
        env=env,
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _written(cache: Path) -> list[str]:
    return sorted(p.stem for p in cache.glob("*/*.json"))


def test_a_sweep_split_over_two_processes_equals_one_process(tmp_path):
    alone = _sweep(tmp_path / "one", None)
    pair = [_sweep(tmp_path / "two", r) for r in (0, 1)]
    outs = [p.communicate() for p in (alone, *pair)]
    for p, (_out, err) in zip((alone, *pair), outs):
        assert p.returncode == 0, err[-2000:]
    assert json.loads(outs[1][0]) == json.loads(outs[0][0]) == json.loads(outs[2][0])
    from helpers.book.store import shards

    share = max(1, shards.usable_cores() // 2)  # two ranks on this machine: each caps its torch threads
    assert [int(re.search(r"threads (\d+)", err).group(1)) <= share for _, err in outs[1:]] == [True, True]


def test_each_process_computes_only_its_share(tmp_path):
    proc = _sweep(tmp_path, 1, world=2, timeout="3")
    _, err = proc.communicate()
    assert proc.returncode != 0 and "rank 1 waited" in err and "Rerun the same command" in err
    # tiny-bert: the unmasked run, then 2 layers x 4 heads; rank 1 of 2 owns items 1, 3, 5, 7 of
    # that list (the classifier sweep also stores the unmasked predictions it computes anyway)
    assert _written(tmp_path) == ["self-L0-mask0", "self-L0-mask2", "self-L1-mask0", "self-L1-mask2", "unmasked"]


def test_a_late_rank_still_computes_its_whole_share(tmp_path):
    # The stall seen on a 16-core GPU machine: rank 0 had written its share before rank 1 looked
    # at the cache. Rank 1 used to split what was MISSING (its own 4) as if it were the whole
    # list, computed 2 of them and waited forever for the other 2. Here rank 0 runs first, alone
    # (it gives up waiting), then rank 1: it must compute its whole share and finish.
    first = _sweep(tmp_path, 0, timeout="3")
    _, err = first.communicate()
    assert first.returncode != 0 and "rank 0 waited" in err
    owned_by_0 = ["self-L0-mask1", "self-L0-mask3", "self-L1-mask1", "self-L1-mask3", "unmasked"]
    assert _written(tmp_path) == owned_by_0
    late = _sweep(tmp_path, 1, timeout="60")
    out, err = late.communicate()
    assert late.returncode == 0, err[-2000:]
    assert len(_written(tmp_path)) == 9 and len(json.loads(out)) == 8


def test_a_failing_rank_stops_the_others_with_its_error(tmp_path):
    start = time.monotonic()
    waiting = _sweep(tmp_path, 0, timeout="300")
    failing = _sweep(tmp_path, 1, timeout="300", SWEEP_FAULT="raise")
    (_, err0), (_, err1) = waiting.communicate(), failing.communicate()
    assert failing.returncode != 0 and "injected fault in the sweep" in err1
    assert waiting.returncode != 0
    assert "rank 1 failed while computing its share of the sweep" in err0 and "injected fault in the sweep" in err0
    assert time.monotonic() - start < 150  # stopped by the failure, not by the 300 s timeout


def test_a_rank_that_dies_without_an_error_is_noticed(tmp_path):
    start = time.monotonic()
    waiting = _sweep(tmp_path, 0, timeout="300")
    dying = _sweep(tmp_path, 1, timeout="300", SWEEP_FAULT="die")
    (_, err0), _ = waiting.communicate(), dying.communicate()
    assert dying.returncode == 3
    assert waiting.returncode != 0 and re.search(r"rank 1 \(pid \d+\) exited without finishing", err0), err0[-2000:]
    assert time.monotonic() - start < 150


def test_status_files_of_an_earlier_job_are_ignored(tmp_path, monkeypatch):
    from helpers.book.store import shards

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(RuntimeError), shards.RankLog(tmp_path).working("an old sweep"):
        raise RuntimeError("old failure")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv(shards.JOB_STARTED, str(time.time() + 10))  # a job that started after that failure
    assert shards.RankLog(tmp_path).check_others() == {}
    monkeypatch.setenv(shards.JOB_STARTED, str(time.time() - 10))  # the same job: the failure counts
    with pytest.raises(
        shards.RankFailed, match="rank 1 failed while computing an old sweep: RuntimeError: old failure"
    ):
        shards.RankLog(tmp_path).check_others()


def test_ranks_sharing_a_machine_share_its_cores():
    from helpers.book.store import shards

    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch; from helpers.book.store import shards; "
            "print(torch.get_num_threads(), shards.cap_threads())",
        ],
        env={**os.environ, "RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"},
        cwd=ROOT,
        text=True,
        capture_output=True,
        check=True,
    )
    before, after = map(int, probe.stdout.split())
    assert after == min(before, max(1, shards.usable_cores() // 2)), (before, after)


def test_under_torchrun_only_rank_0_writes_the_books_copy(smoke, tmp_path, monkeypatch):
    from helpers.book.running import runner

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    assert runner.main(["--profile", "smoke", "--only", "16_rerunning", "--output-dir", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "rank1" / "16_rerunning.ipynb").exists()
    assert not (tmp_path / "out" / "16_rerunning.ipynb").exists()
    assert not (tmp_path / "results" / "smoke" / "run_times.csv").exists()


def test_other_ranks_wait_for_rank_0_to_build_a_model(tmp_path, monkeypatch):
    from helpers.book import course

    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path))
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("SIXTEEN_HEADS_SHARD_TIMEOUT", "1")
    with pytest.raises(TimeoutError, match=r"rank 1 waited .* model nli(@0)? \(built by rank 0\)"):
        course.build_one(load_profile("smoke"), "nli", progress=False)
    assert list(tmp_path.iterdir()) == []  # it built nothing itself


# ---- end to end ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def standin_run(standin_data, tmp_path_factory):
    """Every notebook executed by the runner on the stand-in profile (paper.yml, sizes shrunk)."""
    from helpers.book.running import runner

    work = tmp_path_factory.mktemp("paper-standin")
    name = paper_standins.standin_profile(work)
    env = {
        "SIXTEEN_HEADS_DATA": str(standin_data),
        "SIXTEEN_HEADS_PROFILES": str(work),
        "SIXTEEN_HEADS_RESULTS": str(work / "results"),
        "SIXTEEN_HEADS_CACHE": str(work / "cache"),
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        code = runner.main(["--profile", name, "--output-dir", str(work / "executed")])
        from helpers.book import course

        records = course.records(load_profile(name))
    return code, work, name, records


def test_every_notebook_runs_on_the_paper_profile_standins(standin_run):
    code, work, name, models = standin_run
    assert code == 0
    assert sorted(p.stem for p in (work / "executed").glob("*.ipynb")) == sorted(load_profile("paper").notebooks)
    assert models["translation"]["spec"]["archive"] == "wmt14.en-fr.joined-dict.transformer"
    assert models["translation"]["sizes"] == {"train": 40, "test13": 24, "test14": 24, "mtnt": 16}
    assert models["nli"]["sizes"] == {"train": 60, "matched": 30, "mismatched": 30}
    assert [e["epoch"] for e in models["iwslt"]["epochs"]] == [1, 2, 3]
    assert models["nli"]["spec"]["fine_tune"]["lr"] == 2.0e-5  # the paper's recipe, unchanged


def test_standin_results_cover_the_paper_models_heads(standin_run):
    _, work, name, _ = standin_run
    results = work / "results" / name
    one_head = pd.read_csv(results / "03_one_head_translation.csv")
    assert sorted(one_head.groupby("kind").size().items()) == [("dec_self", 8), ("enc_dec", 8), ("enc_self", 8)]
    assert len(pd.read_csv(results / "03_one_head_classifier.csv")) == 2 * 4  # the stand-in BERT's heads
    params = yaml.safe_load((PROFILES / "paper.yml").read_text())["notebooks"]
    executed = json.loads((work / "executed" / "09_training_dynamics.ipynb").read_text())
    assert (
        executed["metadata"]["sixteen_heads"]["parameters"]["translation"]
        == params["09_training_dynamics"]["translation"]
    )


def _printed(executed: Path) -> str:
    """Everything an executed notebook's cells printed or displayed as text."""
    cells = json.loads(executed.read_text())["cells"]
    out = []
    for cell in cells:
        for o in cell.get("outputs", []):
            out.append("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")))
    return "\n".join(out)


def test_each_chapter_scores_bleu_as_the_authors_script_for_its_table(standin_run):
    """Tables 1, 2 and 5 (chapters 03-05) as wmt_ablation.sh scored them: detokenized, sacreBLEU's
    13a tokenizer against the raw reference; the pruning figures (06-10) as prune.py: tokenized,
    tok:none. Each prints its signature; chapter 02 gives the base models both."""
    _, work, name, models = standin_run
    executed = work / "executed"
    for chapter in ("03_ablating_one_head", "04_keeping_one_head", "05_cross_domain"):
        text = _printed(executed / f"{chapter}.ipynb")
        assert "detokenized: nrefs:1|case:mixed|eff:no|tok:13a" in text, chapter
    for chapter in ("06_pruning_curves", "08_attention_kinds", "09_training_dynamics", "10_appendix_more_tasks"):
        text = _printed(executed / f"{chapter}.ipynb")
        assert "tokenized: nrefs:1|case:mixed|eff:no|tok:none" in text, chapter
    text = _printed(executed / "02_course_models.ipynb")
    assert "tok:none" in text and "BLEU signature (detokenized)" in text and "tok:13a" in text
    scores = models["translation"]["scores"]["test13"]
    assert scores["bleu_detokenized"] != scores["bleu"]  # two definitions, two numbers


def test_a_detokenized_bleu_equals_sacrebleus_defaults_on_detokenized_text():
    """``BleuDefinition("detokenized")`` against an independent computation: Moses-detokenized
    hypotheses scored by ``sacrebleu.corpus_bleu`` with its defaults against the raw references;
    its per-sentence statistics sum to the same corpus BLEU."""
    import sacrebleu
    from sacremoses import MosesDetokenizer

    from helpers.heads.metrics import DETOKENIZED, BleuDefinition, bleu_from_stats, bleu_stats
    from helpers.zoo.translation_task import Pair

    pairs = [
        Pair("", "l' oiseau chan@@ te .", raw_ref="L'oiseau chante."),
        Pair("", "arc @-@ en @-@ ciel , dit @-@ il !", raw_ref="Arc-en-ciel, dit-il !"),
        Pair("", "le chat dort", raw_ref=""),  # no raw reference: the tokenized one, detokenized
    ]
    outputs = ["l' oiseau chante .", "arc @-@ en @-@ ciel , dit @-@ elle !", "le chien dort"]
    definition = BleuDefinition(DETOKENIZED, "fr")
    detok = MosesDetokenizer(lang="fr")
    hyps = [detok.detokenize(merge_bpe(o).split()) for o in outputs]
    refs = ["L'oiseau chante.", "Arc-en-ciel, dit-il !", "le chat dort"]
    assert definition.hypotheses(outputs) == hyps and definition.references(pairs) == refs
    expected = sacrebleu.corpus_bleu(hyps, [refs]).score
    score, signature = definition.score(outputs, pairs)
    assert score == pytest.approx(expected, abs=1e-9) and "tok:13a" in signature
    sums = bleu_stats(definition.hypotheses(outputs), refs, definition.tokenize).sum(0)
    assert bleu_from_stats(sums, definition.tokenize) == pytest.approx(expected, abs=1e-9)
    tokenized = BleuDefinition().score(outputs, pairs)[0]
    assert tokenized == pytest.approx(bleu(outputs, [p.ref for p in pairs])[0]) and tokenized != pytest.approx(score)


def test_the_paper_profile_draws_figure_3_in_sample_as_the_paper():
    """The paper ranks heads by their ablation effect on the very set it then prunes on: the paper
    profile's chapter 06 does too (the held-out variant is the course's choice)."""
    from helpers.book.profiles.profile import chapter_parameters

    assert chapter_parameters(load_profile("paper"), "06_pruning_curves")["held_out_ablation"] is False
    assert chapter_parameters(load_profile("course"), "06_pruning_curves")["held_out_ablation"] is True
