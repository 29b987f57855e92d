"""One registry of model sources: each reference goes to its source, and each source's loader
gives the model that source holds."""

import ast
from pathlib import Path

import pytest
import torch

import helpers
from helpers.zoo import paper_sources, registry
from helpers.zoo.locations import MissingDownloadError


def _logits(model, tokenizer, text="the cat sleeps"):
    with torch.no_grad():
        return model(**tokenizer([text], return_tensors="pt")).logits


def test_each_kind_of_reference_goes_to_its_source(tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_DATA", str(tmp_path / "data"))
    model, tokenizer = registry.load_model("tiny-bert", num_labels=3)
    helpers.save_pruned(model, tmp_path / "saved")
    (tmp_path / "data" / "archive").mkdir(parents=True)
    (tmp_path / "data" / "archive" / "model.pt").write_bytes(b"")  # a fairseq archive's main file
    expected = {
        "tiny-bert": "random",
        "minilm": "shipped",
        str(tmp_path / "saved"): "trained",
        "archive": "downloaded-fairseq",
        "bert-base-uncased": "downloaded",
    }
    assert {ref: registry.source_of(ref).name for ref in expected} == expected
    assert [ref for ref in expected if registry.needs_download(ref)] == ["archive", "bert-base-uncased"]


def test_the_language_models_are_named_in_the_one_registry():
    assert {n: (m.source, m.family) for n, m in registry.NAMED.items()} == {
        "tiny-bert": ("random", registry.ENCODER),
        "minilm": ("shipped", registry.ENCODER),
        "tiny-llama": ("random", registry.LANGUAGE_MODEL),
        "tiny-llama-32": ("random", registry.LANGUAGE_MODEL),
        "smollm2": ("shipped", registry.LANGUAGE_MODEL),
    }
    assert set(registry.TINY_LLAMAS) == {n for n, m in registry.NAMED.items() if m.source == "random"} - {"tiny-bert"}
    assert registry.source_of("smollm2").name == "shipped" and registry.source_of("tiny-llama").name == "random"
    with pytest.raises(ValueError, match="language model; load it with load_causal_lm"):
        registry.load_model("tiny-llama")
    with pytest.raises(ValueError, match="encoder; load it with load_model"):
        registry.load_causal_lm("minilm")
    model, _ = registry.load_causal_lm("tiny-llama", seed=0)
    assert helpers.head_grid(model) == {"self": (4, 6)} and not model.training


def test_no_module_but_the_registry_lists_the_books_models():
    """A list of model names, or a test for one, outside ``zoo/registry.py`` is a second registry
    (``registry.reads_smollm2`` answers the one question the others asked)."""
    names = set(registry.NAMED)
    found = []
    for path in sorted((Path(helpers.__file__).parent).rglob("*.py")):
        if path.name == "registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            values = []
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                values = node.elts
            elif isinstance(node, ast.Dict):
                values = [k for k in node.keys if k is not None]
            elif isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
            if any(isinstance(v, ast.Constant) and v.value in names for v in values):
                found.append(f"{path.relative_to(Path(helpers.__file__).parent)}:{node.lineno}")
    assert found == []


def test_random_models_repeat_with_their_seed_and_differ_across_seeds():
    a, tokenizer = registry.load_model("tiny-bert", num_labels=3, seed=1)
    b, _ = registry.load_model("tiny-bert", num_labels=3, seed=1)
    c, _ = registry.load_model("tiny-bert", num_labels=3, seed=2)
    assert not a.training
    assert torch.equal(_logits(a, tokenizer), _logits(b, tokenizer))
    assert not torch.equal(_logits(a, tokenizer), _logits(c, tokenizer))


def test_a_trained_folder_loads_back_pruned_with_its_tokenizer(tmp_path):
    model, tokenizer = registry.load_model("tiny-bert", num_labels=2, seed=0)
    helpers.prune_heads(model, {"self": {1: [0, 2]}})
    helpers.save_pruned(model, tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    again, again_tokenizer = registry.load_model(tmp_path / "m")
    assert helpers.pruned_heads(again) == {"self": {1: [0, 2]}}
    assert torch.equal(_logits(again, again_tokenizer), _logits(model.eval(), tokenizer))
    bare, none = registry.load_model(_without_tokenizer(tmp_path / "m"))
    assert none is None and torch.equal(_logits(bare, tokenizer), _logits(model, tokenizer))


def _without_tokenizer(folder):
    out = folder.with_name("weights-only")
    out.mkdir()
    for name in ("config.json", "model.safetensors", "pruned_heads.json"):
        (out / name).write_bytes((folder / name).read_bytes())
    return out


def test_the_shipped_encoder_is_minilm_with_a_seeded_classifier_head():
    model, tokenizer = registry.load_encoder("minilm", num_labels=3, seed=0)
    again, _ = registry.load_encoder("minilm", num_labels=3, seed=0)
    assert helpers.head_grid(model) == {"self": (6, 12)}
    assert torch.equal(_logits(model, tokenizer), _logits(again, tokenizer))


def test_a_fairseq_archive_is_not_an_encoder(tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_DATA", str(tmp_path))
    (tmp_path / "wmt").mkdir()
    (tmp_path / "wmt" / "model.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="fairseq archive, not a Hugging Face encoder"):
        registry.load_encoder("wmt")


def test_an_absent_hub_model_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_DATA", str(tmp_path))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        MissingDownloadError, match="python -m helpers.book.running.downloads --profile paper download"
    ):
        registry.load_model("some-org/absent-model")


def test_downloaded_references_are_read_by_the_paper_readers(monkeypatch, tmp_path):
    """Loading goes through one place: the registry hands a downloaded reference to
    ``paper_sources``, and only such a reference."""
    calls = []
    monkeypatch.setattr(paper_sources, "resolve_model", lambda name: calls.append(name) or str(tmp_path / "none"))
    with pytest.raises(MissingDownloadError):
        registry.load_model("bert-base-uncased")
    registry.load_model("tiny-bert")
    registry.load_model("minilm")
    assert calls == ["bert-base-uncased"]
