"""The KV cache of pruned decoder-only LMs, and a pruned model that saves, reloads in a fresh
process and generates.

Independent truths: the bytes of the cache tensors the model itself leaves after a forward pass
or ``generate`` (against the prediction from the pruned layers and the config), arithmetic done
by hand on a published config, and the in-memory pruned model's own logits (against the model a
fresh Python process rebuilds from the saved files alone).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import DECODER_ONLY_CASES, GQA_CASES

import helpers
from helpers.heads.pruning import LAYOUT_KEY, kept_head_counts
from helpers.kv.cache import PublishedModel, cache_bytes, kv_bytes, kv_bytes_per_token, published_kv_table
from helpers.probes.induction import copying_accuracy, copying_nll, induction_scores, repeated_tokens

REPO = Path(__file__).resolve().parents[1]
# Layer 0 keeps head 3 alone (KV group 0 empties), layer 1 is uneven (group 0: head 0, group 1: 2 and 3).
EMPTIES_A_GROUP = {"self": {0: [0, 1, 2], 1: [1]}}
EMPTIES_A_LAYER = {"self": {0: [0, 1, 2, 3], 1: [1]}}


def _cache_after(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=True).past_key_values


@pytest.mark.parametrize("spec", [None, EMPTIES_A_GROUP, EMPTIES_A_LAYER], ids=["unpruned", "group", "layer"])
@pytest.mark.parametrize("name", sorted(DECODER_ONLY_CASES))
def test_predicted_cache_bytes_equal_the_cache_tensors(name, spec):
    case = DECODER_ONLY_CASES[name]()
    if spec:
        helpers.prune_heads(case.model, spec)
    ids = torch.randint(3, 20, (2, 9), generator=torch.Generator().manual_seed(0))  # past the tiny windows (4)
    assert cache_bytes(_cache_after(case.model, ids)) == kv_bytes(case.model, tokens=9, batch=2)
    assert (
        cache_bytes(_cache_after(case.model, ids[:, :3]))
        == kv_bytes(case.model, tokens=3, batch=2)
        == 3 * 2 * kv_bytes_per_token(case.model)
    )  # no window full yet: every layer grows per token


@pytest.mark.parametrize("name", sorted(GQA_CASES))
def test_pruning_query_heads_saves_no_cache_until_a_group_empties(name):
    case = GQA_CASES[name]()
    full = kv_bytes_per_token(case.model)
    helpers.prune_heads(case.model, {"self": {0: [0], 1: [3]}})  # one head of a group: the group stays
    assert kv_bytes_per_token(case.model) == full
    helpers.prune_heads(case.model, {"self": {0: [1]}})  # group 0 of layer 0 empties: a quarter of the cache
    assert kv_bytes_per_token(case.model) == full * 3 // 4
    assert kept_head_counts(case.model) == {"self": {"num_attention_heads": [2, 3], "num_key_value_heads": [1, 2]}}


def test_cache_bytes_follow_the_dtype():
    case = GQA_CASES["llama"]()
    full = kv_bytes_per_token(case.model)
    case.model.to(torch.bfloat16)
    ids = case.batch["input_ids"][:1]
    assert kv_bytes_per_token(case.model) * 2 == full
    assert cache_bytes(_cache_after(case.model, ids)) == kv_bytes(case.model, ids.shape[1])


def test_published_arithmetic_by_hand():
    llama = PublishedModel("Llama-3-8B", layers=32, kv_heads=8, head_dim=128, parameters=8.03)
    assert llama.bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 131072  # 128 KiB in bf16
    assert llama.crossover() == pytest.approx(8.03e9 * 2 / 131072)  # about 122,500 tokens
    # A layer caches 2 x 10 x 2 = 40 bytes a token; 5 of the 6 layers keep at most 10 positions.
    small = PublishedModel("small", layers=6, kv_heads=1, head_dim=10, parameters=1e-6, sliding=5, window=10)
    assert small.crossover() == pytest.approx(2000 / (6 * 40))  # 2,000 bytes of weights: 8.3 tokens, no window full
    large = PublishedModel("large", layers=6, kv_heads=1, head_dim=10, parameters=1e-5, sliding=5, window=10)
    assert large.crossover() == pytest.approx((20000 - 5 * 10 * 40) / 40)  # the full layer pays the rest: 450
    assert large.cache_bytes(450) == pytest.approx(20000)
    table = published_kv_table([llama], removed_share=1 / 3).iloc[0]
    assert table["KV heads kept"] == 5 and table["KiB per token, pruned"] == pytest.approx(128 * 5 / 8)


# ---- a pruned model to keep --------------------------------------------------------------------
_RELOAD = """
import sys, torch, helpers
model = helpers.load_pruned(sys.argv[1])
ids = torch.load(sys.argv[2])
out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, min_new_tokens=6,
                     do_sample=False, pad_token_id=0, output_logits=True, return_dict_in_generate=True)
torch.save({"sequences": out.sequences, "logits": torch.stack(out.logits)}, sys.argv[3])
"""


def _generate(model, ids):
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=6,
        min_new_tokens=6,
        do_sample=False,
        pad_token_id=0,
        output_logits=True,
        return_dict_in_generate=True,
    )
    return {"sequences": out.sequences, "logits": torch.stack(out.logits)}


@pytest.mark.parametrize("name", ["llama", "qwen3", "gemma3"])
def test_a_pruned_model_reloads_in_a_fresh_process_and_generates_the_same(name, tmp_path):
    case = GQA_CASES[name]()
    helpers.prune_heads(case.model, EMPTIES_A_GROUP)
    ids = case.batch["input_ids"][:2]  # no padding
    expected = _generate(case.model, ids)
    helpers.save_pruned(case.model, tmp_path / "pruned")
    torch.save(ids, tmp_path / "ids.pt")
    done = subprocess.run(
        [sys.executable, "-c", _RELOAD, str(tmp_path / "pruned"), str(tmp_path / "ids.pt"), str(tmp_path / "out.pt")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = torch.load(tmp_path / "out.pt")
    assert torch.equal(got["sequences"], expected["sequences"])
    torch.testing.assert_close(got["logits"], expected["logits"], rtol=0, atol=1e-6)
    config = json.loads((tmp_path / "pruned" / "config.json").read_text())
    assert config[LAYOUT_KEY] == {"self": {"num_attention_heads": [1, 3], "num_key_value_heads": [1, 2]}}
    assert config["num_attention_heads"] == 4  # the architecture's own fields stay the unpruned ones


def test_a_tampered_layout_is_refused(tmp_path):
    case = GQA_CASES["llama"]()
    helpers.prune_heads(case.model, EMPTIES_A_GROUP)
    helpers.save_pruned(case.model, tmp_path)
    record = json.loads((tmp_path / "pruned_heads.json").read_text())
    record["pruned"]["self"]["1"] = []
    (tmp_path / "pruned_heads.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="saved layout says"):
        helpers.load_pruned(tmp_path)


# ---- induction heads and copying -------------------------------------------------------------


def _uniform_head(case, layer, head):
    """Zero query head ``head`` of ``layer``: its scores are all 0, its attention uniform over
    the positions it may see (any positional encoding leaves a zero query at zero)."""
    site = helpers.attention_sites(case.model)[layer]
    row = site.heads.index(head) * site.head_dim
    with torch.no_grad():
        site.query.weight[row : row + site.head_dim] = 0
        if site.query.bias is not None:
            site.query.bias[row : row + site.head_dim] = 0


@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3"])
def test_a_uniform_head_scores_the_mean_of_one_over_its_positions(name):
    case = GQA_CASES[name]()
    helpers.prune_heads(case.model, {"self": {0: [0]}})  # storage order shifts: head 2 is stored second
    _uniform_head(case, 0, 2)
    batch = repeated_tokens(vocab_size=20, length=5, batch=3, seed=0, low=3)
    before = case.model.config._attn_implementation
    scores = induction_scores(case.model, batch)
    uniform = sum(1 / (p + 1) for p in range(6, 10)) / 4  # queries 6..9 of [bos, 5 tokens, 5 tokens]
    assert scores[0, 2].item() == pytest.approx(uniform, rel=1e-5)
    assert torch.isnan(scores[0, 0]) and not torch.isnan(scores[0, [1, 3]]).any() and not torch.isnan(scores[1]).any()
    assert ((scores[1] >= 0) & (scores[1] <= 1)).all()
    assert case.model.config._attn_implementation == before


def test_copying_nll_counts_only_the_predictable_second_copy():
    case = GQA_CASES["llama"]()
    batch = repeated_tokens(vocab_size=20, length=5, batch=2, seed=1, low=3, bos=1)
    ids = batch["input_ids"]
    assert ids.shape == (2, 11) and torch.equal(ids[:, 1:6], ids[:, 6:]) and (ids[:, 0] == 1).all()
    with torch.no_grad():
        got = copying_nll(case.model, batch)
        logp = torch.log_softmax(case.model(input_ids=ids).logits.float(), -1)
    for b in range(2):
        want = -sum(logp[b, p, ids[b, p + 1]] for p in range(6, 10))  # predicting tokens 7..10
        assert got[b, 0].item() == pytest.approx(want.item(), rel=1e-5) and got[b, 1].item() == 4
    assert 0 <= copying_accuracy(case.model, batch) <= 1


def test_the_copying_probe_scores_pruning_specs_like_text():
    from helpers.zoo.causal_lm import PerplexityScorer

    case = GQA_CASES["llama"]()
    batches = [repeated_tokens(vocab_size=20, length=5, batch=2, seed=s, low=3) for s in (0, 1)]
    scorer = PerplexityScorer(batches, configs_per_pass=2, stats=copying_nll)
    rows = torch.cat([copying_nll(case.model, b) for b in batches]).sum(0)
    assert scorer(case.model) == pytest.approx(-(rows[0] / rows[1]).item(), rel=1e-6)
    spec = {"self": {0: [1, 2]}}
    with helpers.HeadGates(case.model) as gates:
        gates.mask(spec)
        masked = scorer(case.model)
    assert scorer.many(case.model, [{}, spec]) == pytest.approx([scorer(case.model), masked], rel=1e-5)


@pytest.mark.parametrize("name", ["llama", "gemma3"])
def test_generation_leaves_the_predicted_cache(name):
    from helpers.kv.cache import generate_cached, generation_seconds

    case = GQA_CASES[name]()
    helpers.prune_heads(case.model, EMPTIES_A_GROUP)
    ids = case.batch["input_ids"][:2]
    sequences, cache = generate_cached(case.model, ids, 5)
    assert sequences.shape == (2, ids.shape[1] + 5)
    assert cache_bytes(cache) == kv_bytes(case.model, tokens=ids.shape[1] + 4, batch=2)
    times = generation_seconds(case.model, ids, new_tokens=2, repeats=2, warmup=1)
    assert len(times) == 2 and all(t > 0 for t in times)
