"""Chapter 13's experiment code on a tiny Llama: what removing heads buys (KV bytes, cached
generation) and breaks (copying), checked against the pruning and cache arithmetic."""

import pytest
import torch
from tiny_models import llama

import helpers
from helpers.book.experiments import buys_and_breaks as bb
from helpers.probes.induction import repeated_tokens


def _importance(case):
    return helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, progress=False)


def test_pruned_variants_remove_the_least_important_groups_and_heads():
    case = llama()
    importance = _importance(case)
    variants = bb.pruned_variants(case.model, importance, (0, 1 / 3, 2 / 3))
    assert set(variants) == {
        ("unpruned", 0.0),
        ("KV groups", 1 / 3),
        ("query heads", 1 / 3),
        ("KV groups", 2 / 3),
        ("query heads", 2 / 3),
    }
    assert variants["unpruned", 0.0] is case.model
    groups = bb.kv_group_order(case.model, importance)
    sums = {(i, g): float(importance["self"][i, 2 * g : 2 * g + 2].sum()) for i in range(2) for g in range(2)}
    assert groups == sorted(sums, key=sums.get)  # a group's importance is the sum of its two query heads'
    layer, group = groups[0]  # 1/3 of 4 groups: the least important one, both its heads
    assert helpers.pruned_heads(variants["KV groups", 1 / 3]) == {"self": {layer: [2 * group, 2 * group + 1]}}
    assert sum(len(h) for h in helpers.pruned_heads(variants["query heads", 2 / 3])["self"].values()) == 5  # of 8
    assert helpers.pruned_heads(case.model) == {}  # the copies were pruned, not the model


def test_memory_and_speed_measures_what_it_predicts():
    case = llama()
    variants = bb.pruned_variants(case.model, _importance(case), (0, 2 / 3))
    prompts = {1: case.batch["input_ids"][:1, :5], 2: case.batch["input_ids"][:2, :5]}
    table = bb.memory_and_speed(
        variants, prompts, new_tokens=3, report_batches=[case.batch], repeats=1, dtypes=("float32", "bfloat16")
    )
    assert len(table) == 3 * 2 * 2
    assert (table["KV bytes, predicted"] == table["KV bytes, measured"]).all()
    assert (table["cached positions"] == 5 + 3 - 1).all()
    f32 = table[table["dtype"] == "float32"].set_index(["unit", "batch"])
    bf16 = table[table["dtype"] == "bfloat16"].set_index(["unit", "batch"])
    assert (f32["KV bytes per token"] == 2 * bf16["KV bytes per token"]).all()
    assert f32.loc[("KV groups", 1), "KV heads"] < f32.loc[("unpruned", 1), "KV heads"] == 4
    assert f32.loc[("query heads", 1), "query heads"] == 8 - 5
    assert set(table["device"]) == {f"cpu: {torch.get_num_threads()} threads"}  # where the timings ran


def test_copying_curves_start_unmasked_and_end_fully_masked():
    case = llama()
    probe = [repeated_tokens(vocab_size=20, length=5, batch=2, seed=0, low=3)]
    importance = {"I_h on text": _importance(case)}
    orders = bb.orders_for(case.model, importance, random_orders=1, seed=0)
    curves = bb.copying_curves(case.model, orders, verse_batches=[case.batch], probe=probe, step=0.25)
    assert set(curves["order"]) == {"I_h on text", "random 0"}
    first = curves[curves["pruned"] == 0]
    assert first["verse perplexity"].nunique() == 1 and first["copying accuracy"].nunique() == 1
    from helpers.zoo.causal_lm import PerplexityScorer

    assert first["verse perplexity"].iloc[0] == pytest.approx(
        float(torch.exp(torch.tensor(-PerplexityScorer([case.batch], 1)(case.model))))
    )
    assert ((curves["copying accuracy"] >= 0) & (curves["copying accuracy"] <= 1)).all()
    row = bb.broken_at(curves, "random 0", tolerances=(10.0,))  # everything is within 1,000%: all prunable
    assert row["prunable within 1000% (verses)"] == 1.0 and 0 <= row["copying accuracy at 1000%"] <= 1
    ranks = bb.induction_ranks(case.model, probe, importance)
    assert len(ranks) == 8 and sorted(ranks["rank by I_h on text"]) == list(range(1, 9))
    assert ranks.loc[ranks["induction score"].idxmax(), "induction rank"] == 1


def test_copying_scores_from_one_pass_equal_the_separate_measures():
    """The curves read the copying probe's perplexity and accuracy from one pass per step; each
    equals that step's heads masked and ``copying_nll`` and ``copying_accuracy`` run on their own."""
    from helpers.heads.gates import spec_of
    from helpers.probes.induction import copying_accuracy, copying_nll

    case = llama()
    probe = [repeated_tokens(vocab_size=40, length=6, batch=3, seed=s, low=3) for s in range(2)]
    orders = bb.orders_for(case.model, {"I_h": _importance(case)}, random_orders=1, seed=1)
    curves = bb.copying_curves(
        case.model, orders, verse_batches=[case.batch], probe=probe, step=0.25, configs_per_pass=2
    )
    for row in curves.to_dict("records"):
        with helpers.HeadGates(case.model) as gates, torch.no_grad():
            if row["pruned"]:
                gates.mask(spec_of(orders[row["order"]][: row["pruned"]]))
            nll = torch.cat([copying_nll(case.model, b) for b in probe]).sum(0)
            accuracy = sum(copying_accuracy(case.model, b) for b in probe) / len(probe)
        assert row["copying perplexity"] == pytest.approx(float(torch.exp(nll[0] / nll[1])), rel=1e-6)
        assert row["copying accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert curves["copying accuracy"].nunique() > 1
    # and to the bit what the chapter computed before, in three passes per step (one per score)
    import numpy as np

    from helpers.sweeps.pruning_curves import counts, score_specs
    from helpers.zoo.causal_lm import PerplexityScorer

    steps = [spec_of(order[:c]) for order in orders.values() for c in counts(len(order), 0.25)]
    copying = score_specs(case.model, steps, evaluate=PerplexityScorer(probe, 2, stats=copying_nll), progress=False)
    accuracy = score_specs(
        case.model, steps, evaluate=lambda m: float(np.mean([copying_accuracy(m, b) for b in probe])), progress=False
    )
    assert curves["copying perplexity"].tolist() == [float(np.exp(-c)) for c in copying]
    assert curves["copying accuracy"].tolist() == accuracy


def test_published_models_are_read_as_their_configs_say():
    from helpers.kv.cache import published_kv_table

    table = published_kv_table(bb.PUBLISHED)
    smol = table.set_index("model").loc["SmolLM2-135M"]
    assert smol["KiB per token"] == pytest.approx(2 * 30 * 3 * 64 * 2 / 1024)  # 22.5 KiB in bf16
    assert smol["KV heads kept"] == 2


def test_keep_and_reload_generates_the_same_in_a_fresh_process():
    case = llama()
    helpers.prune_kv_groups(case.model, {"self": {0: [1]}})

    class Tokenizer:  # the tiny model's ids as "text": one id per character code
        def __call__(self, text, return_tensors=None, add_special_tokens=False):
            return {"input_ids": torch.tensor([[3 + ord(c) % 20 for c in text]])}

        def decode(self, ids):
            return " ".join(str(int(i)) for i in ids)

    (kept,) = bb.keep_and_reload(case.model, Tokenizer(), "abcde", 4).to_dict("records")
    assert kept["same tokens"] and kept["largest logit gap"] <= 1e-6
    assert (kept["query heads per layer"], kept["KV groups per layer"]) == ("[2, 4]", "[1, 2]")
    assert len(kept["generated"].split()) == 4 and kept["megabytes saved"] > 0


def test_the_copying_kept_and_its_interval_over_sequences_equal_a_hand_computed_bootstrap():
    """``copying_kept``: the pruned model's copying accuracy over the unpruned one's on a probe, and
    a paired bootstrap interval over its sequences, equal to per-sequence counts (from each
    model's own ``copying_stats``) resampled by hand with the same draws; nothing pruned keeps all."""
    import numpy as np

    from helpers.heads.gates import HeadGates, spec_of
    from helpers.heads.significance import resample_indices
    from helpers.probes.induction import copying_stats

    case = llama()
    probe = [repeated_tokens(vocab_size=40, length=6, batch=4, seed=s, low=3) for s in range(8)]  # 32 sequences
    order = bb.orders_for(case.model, {"I_h": _importance(case)}, random_orders=0, seed=0)["I_h"]
    kept, low, high, sequences, level = bb.copying_kept(
        case.model, order, pruned=3, probe=probe, n_resamples=200, seed=5, configs_per_pass=2
    )
    with torch.no_grad():
        base = torch.cat([copying_stats(case.model, b) for b in probe]).numpy()
        with HeadGates(case.model) as gates:
            gates.mask(spec_of(order[:3]))
            cut = torch.cat([copying_stats(case.model, b) for b in probe]).numpy()
    assert sequences == 32
    assert kept == pytest.approx((cut[:, 2].sum() / cut[:, 1].sum()) / (base[:, 2].sum() / base[:, 1].sum()))
    ratios = [
        (cut[i, 2].sum() / cut[i, 1].sum()) / (base[i, 2].sum() / base[i, 1].sum())
        for i in resample_indices(32, 200, 5)
    ]
    assert level in bb.CALIBRATION_LEVELS  # the percentile level calibration chose, at least the nominal 99%
    assert (low, high) == pytest.approx(tuple(np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2])))
    assert low <= kept <= high
    assert bb.copying_kept(case.model, order, pruned=0, probe=probe, n_resamples=50)[:3] == (1.0, 1.0, 1.0)


def test_the_verdict_probe_has_enough_sequences_for_its_bootstrap_and_none_of_the_curves():
    class Tokenizer:  # what the probes read of a tokenizer
        all_special_ids, bos_token_id = [0, 1], 1

        def __len__(self):
            return 500

    probe = bb.verdict_probe(Tokenizer(), length=6, sequences=33, batch=8, seed=0)
    assert [len(b["input_ids"]) for b in probe] == [8, 8, 8, 8, 1]
    curves, held_out = bb.copying_probes(Tokenizer(), 6, sequences=16, batch=8, seed=0)
    seen = {tuple(row.tolist()) for b in curves + held_out for row in b["input_ids"]}
    assert not seen & {tuple(row.tolist()) for b in probe for row in b["input_ids"]}
    with pytest.raises(ValueError, match="at least 30"):
        bb.verdict_probe(Tokenizer(), length=6, sequences=8, batch=8, seed=0)


def test_served_by_llama_cpp_reports_what_llama_cpp_computed_allocated_and_timed(tmp_path):
    """Chapter 13's llama.cpp section on the smoke profile's tiny Llama (SmolLM2's vocabulary):
    the exact settings reproduce transformers, the caches hold the predicted bytes, the kept file
    is written readable, and the speed summary is the median of the rows it summarises."""
    import os
    import stat

    import numpy as np

    from helpers.book.experiments import served as sv
    from helpers.zoo.registry import load_causal_lm
    from helpers.zoo.shipped import smollm2_gguf

    model, tokenizer = load_causal_lm("tiny-llama")
    torch.manual_seed(1)
    variants = bb.pruned_variants(model, {"self": torch.rand(4, 6)}, (0, 1 / 3))
    verses = [
        tokenizer(t)["input_ids"] for t in ("In the beginning God created the heavens.", "And the earth was void.")
    ]
    prompt = tokenizer("And God said, Let there be light: and there was light.")["input_ids"]
    exact, speed = sv.served(
        variants,
        smollm2_gguf(),
        prompt=prompt,
        new_tokens=4,
        verses=verses,
        threads=(1,),
        repeats=2,
        keep=("KV groups", 1 / 3),
        out_dir=tmp_path,
    )
    assert list(zip(exact["unit"], exact["share"])) == list(variants)
    assert (exact["greedy tokens equal (exact)"] == 4).all() and (exact["largest log-prob gap"] < 1e-3).all()
    assert (exact["scored tokens"] == sum(len(v) - 1 for v in verses)).all()
    for tag in ("f32", "f16"):
        assert (exact[f"KV MiB, llama.cpp ({tag})"] == exact[f"KV MiB, predicted ({tag})"].round(2)).all()
    padded = exact.set_index("unit")["padded heads"]
    assert padded["KV groups"] == 0 and padded["unpruned"] == 0  # whole groups go: nothing to even out
    (kept,) = [f for f in exact["file"] if isinstance(f, str) and f]
    assert kept == "13_KV_groups-0.333.f16.gguf" and stat.S_IMODE(os.stat(tmp_path / kept).st_mode) & 0o044
    assert len(speed) == len(variants) * 2
    summary = sv.speed_summary(speed).set_index("unit")
    medians = speed.groupby("unit")["generated tokens per second"].median()
    assert np.isclose(
        summary.loc["KV groups", "generated tokens per second, ratio"], medians["KV groups"] / medians["unpruned"]
    )
    assert list(speed["unit"]) == [unit for unit, _ in variants] * 2  # timed in turn, repeat by repeat


def test_the_copying_interval_is_widened_until_it_covers_its_level():
    """Sequences of very unequal length and accuracy (a few long ones carry most tokens): drawn 32
    at a time from a population, the plain 99% percentile interval of the kept ratio misses the
    population's ratio more than 1% of the time; the calibrated one (a double bootstrap choosing a
    wider level) misses it less often."""
    import numpy as np

    from helpers.heads.significance import resample_indices, resampled_sums

    rng = np.random.default_rng(0)
    population = 4000
    tokens = np.ceil(rng.pareto(1.2, population) * 20 + 5)
    base_right = rng.binomial(tokens.astype(int), 0.9)
    cut_right = rng.binomial(tokens.astype(int), rng.beta(2, 2, population))
    truth = (cut_right.sum() / tokens.sum()) / (base_right.sum() / tokens.sum())
    plain, calibrated = [], []
    for draw in range(150):
        pick = rng.integers(0, population, 32)
        base = np.stack([base_right[pick], tokens[pick]], 1).astype(float)
        cut = np.stack([cut_right[pick], tokens[pick]], 1).astype(float)
        indices = resample_indices(32, 300, draw)
        ratios = bb._kept_ratio(resampled_sums(base, indices), resampled_sums(cut, indices))
        low, high = np.quantile(ratios, [0.005, 0.995])
        plain.append(low <= truth <= high)
        low, high, level = bb.calibrated_interval(base, cut, coverage=0.99, n_resamples=300, seed=draw, draws=60)
        calibrated.append(low <= truth <= high)
    assert np.mean(plain) < 0.97 and np.mean(calibrated) > np.mean(plain), (np.mean(plain), np.mean(calibrated))
