"""Chapter 14b's experiment (``chapters/ch14b_served_at_equal_memory.py``): its scores against float64
arithmetic written here, its summaries recomputed from their rows by other code, its pairs
against a search written here, and the whole chain served on the tiny Llama."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch

from helpers.book.chapters import ch14b_served_at_equal_memory as served_memory
from helpers.book.chapters.ch14b_served_at_equal_memory import REFERENCE, SETUPS
from helpers.book.experiments import buys_and_breaks
from helpers.serving.llama_api import Cache
from helpers.zoo.registry import load_causal_lm
from helpers.zoo.shipped import smollm2_gguf


def test_text_scores_are_the_nll_and_the_kl_over_the_whole_vocabulary():
    g = torch.Generator().manual_seed(0)
    ref_logits, logits = torch.randn(5, 50, generator=g), torch.randn(5, 50, generator=g)
    targets = torch.randint(0, 50, (5,), generator=g)
    nll, kl = served_memory.text_scores(torch.log_softmax(ref_logits, -1), torch.log_softmax(logits, -1), targets)
    p = np.exp(ref_logits.double().numpy())
    p /= p.sum(1, keepdims=True)
    q = np.exp(logits.double().numpy())
    q /= q.sum(1, keepdims=True)
    assert nll == pytest.approx(-np.mean(np.log(q[np.arange(5), targets.numpy()])), abs=1e-6)
    assert kl == pytest.approx(np.mean((p * np.log(p / q)).sum(1)), abs=1e-6)


def _scores(effects: dict[str, float], texts: int = 30, seed: int = 0) -> pd.DataFrame:
    """Per-text rows: the reference's nll per text, and each setup's with its mean ``effect`` added
    (and noise of its own)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(2.0, 3.0, texts)
    rows = []
    for name, effect in {REFERENCE: 0.0, **effects}.items():
        nll = base + (effect + rng.normal(0, 0.01, texts) if name != REFERENCE else 0)
        rows += [{"setup": name, "text": i, "tokens": 256, "nll": v, "kl": abs(effect)} for i, v in enumerate(nll)]
    return pd.DataFrame(rows)


def test_the_quality_table_is_recomputed_from_its_rows():
    scores = _scores({"q8_0 cache": 0.001, "1/3 KV groups removed": 1.0})
    quality = served_memory.quality_table(scores, n_resamples=2000, seed=1).set_index("setup")
    for name in ("q8_0 cache", "1/3 KV groups removed"):
        a = scores[scores["setup"] == name].sort_values("text")["nll"].to_numpy()
        b = scores[scores["setup"] == REFERENCE].sort_values("text")["nll"].to_numpy()
        assert quality.loc[name, "perplexity"] == pytest.approx(math.exp(a.mean()))
        assert quality.loc[name, "perplexity change"] == pytest.approx(math.exp(a.mean() - b.mean()) - 1)
        means = [(a - b)[np.random.default_rng(k).integers(0, 30, 30)].mean() for k in range(2000)]
        low, high = np.expm1(np.quantile(means, [0.01, 0.99]))  # another draw: the same interval within noise
        assert quality.loc[name, "change low"] == pytest.approx(low, abs=0.002)
        assert quality.loc[name, "change high"] == pytest.approx(high, abs=0.002)
    with pytest.raises(ValueError, match="same texts"):
        served_memory.quality_table(scores.iloc[1:], n_resamples=10)


def _memory(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    """(setup, family, weight MiB, cache MiB) at one context size, cache-only for f16 weights."""
    out = []
    for order, (name, family, weights, cache) in enumerate(rows):
        quantized_weights = "Q" in name and "weights" in name
        out.append(
            {
                "setup": name,
                "order": order,
                "family": family,
                "cells": 2048,
                "weights": "q8_0" if quantized_weights else "f16",
                "removed": 1 / 3 if family == "removal" else 0.0,
                "K type": "q8_0" if "cache" in name else "f16",
                "V type": "q8_0" if "cache" in name else "f16",
                "K rotated": "cache" in name,
                "weight bytes, predicted": int(weights * 2**20),
                "cache bytes, predicted": int(cache * 2**20),
                "total MiB": weights + cache,
            }
        )
    return pd.DataFrame(out)


MEMORY = _memory(
    [
        (REFERENCE, REFERENCE, 257, 45),
        ("q8_0 cache", "quantized", 257, 24),
        ("q4_0 cache", "quantized", 257, 12.7),
        ("q4_0 cache without rotation", "quantized", 257, 12.7),
        ("1/3 KV groups removed", "removal", 240, 30),
        ("2/3 KV groups removed", "removal", 223, 15),
        ("Q8_0 weights", "quantized", 136, 45),
    ]
)


def test_partners_are_the_quantize_only_setup_with_the_most_bytes_within_the_removals():
    for axis, column in (("total", "total"), ("cache", "cache bytes, predicted")):
        pairs = served_memory.partners(MEMORY, axis).set_index("removal")
        table = MEMORY.assign(total=MEMORY["weight bytes, predicted"] + MEMORY["cache bytes, predicted"])
        for removal, row in pairs.iterrows():
            mine = table.loc[table["setup"] == removal, column].iloc[0]
            rivals = table[(table["family"] == "quantized") & (table[column] <= mine)]
            if axis == "cache":
                rivals = rivals[rivals["weights"] == "f16"]
            # a search written here: the most bytes, and among equals the first listed
            most = rivals[column].max()
            best = rivals[rivals[column] == most].sort_values("order")["setup"].iloc[0]
            assert row["partner"] == best, (axis, removal)
    cache = served_memory.partners(MEMORY, "cache").set_index("removal")
    assert cache.loc["2/3 KV groups removed", "partner"] == "q4_0 cache"  # the rotated one of two equals
    assert cache.loc["1/3 KV groups removed", "partner"] == "q8_0 cache"
    total = served_memory.partners(MEMORY, "total").set_index("removal")
    assert total.loc["2/3 KV groups removed", "partner"] == "Q8_0 weights"


def test_pairs_decide_who_wins_by_their_intervals():
    effects = {
        "q8_0 cache": 0.001,
        "q4_0 cache": 0.04,
        "q4_0 cache without rotation": 0.13,
        "1/3 KV groups removed": 1.3,
        "2/3 KV groups removed": -0.5,  # a removal better than every quantization within its bytes
        "Q8_0 weights": 0.004,
    }
    pairs = served_memory.pair_table(_scores(effects), MEMORY, n_resamples=1000).set_index(["axis", "removal"])
    assert pairs.loc[("total", "1/3 KV groups removed"), "quantizing wins"]
    assert not pairs.loc[("total", "1/3 KV groups removed"), "removal wins"]
    assert pairs.loc[("total", "2/3 KV groups removed"), "removal wins"]
    assert pairs.loc[("cache", "2/3 KV groups removed"), "gap"] == pytest.approx(0.04 + 0.5, abs=0.01)


def test_the_frontier_keeps_exactly_the_setups_no_other_beats():
    quality = pd.DataFrame(
        {"setup": MEMORY["setup"], "perplexity": [10.0, 10.01, 10.4, 11.3, 37.0, 60.0, 10.05]}
    ).assign(**{"perplexity change": 0.0, "KL": 0.0})
    table = served_memory.frontier(MEMORY, quality).set_index("setup")
    for a in table.index:
        beaten = any(
            table.loc[b, "total MiB"] <= table.loc[a, "total MiB"]
            and table.loc[b, "perplexity"] < table.loc[a, "perplexity"]
            for b in table.index
            if b != a
        )
        assert table.loc[a, "unbeaten"] == (not beaten), a
    assert not table.loc["1/3 KV groups removed", "unbeaten"] and table.loc["Q8_0 weights", "unbeaten"]
    budgets = served_memory.budget_table(table.reset_index(), [1.0, 0.6, 0.1]).set_index("budget")
    assert budgets.loc[1.0, "best setup"] == REFERENCE
    assert budgets.loc[0.6, "best setup"] == "Q8_0 weights"  # 181 of 302 MiB
    assert budgets.loc[0.1, "best setup"] == "" and budgets.loc[0.1, "setups within"] == 0


def test_every_setup_is_named_once_and_an_unknown_extra_is_refused():
    names = [s.name for s in served_memory.chosen_setups(["1/3 removed + Q8_0 weights"])]
    assert len(names) == len(set(names)) == len(SETUPS) + 1
    assert {s.family for s in SETUPS} == {REFERENCE, "quantized", "removal"}
    with pytest.raises(ValueError, match="no extra setup"):
        served_memory.chosen_setups(["2/3 removed + Q2_K"])


def test_the_chain_serves_the_tiny_llama_and_keeps_the_unbeaten_files(tmp_path):
    model, tokenizer = load_causal_lm("tiny-llama-32", seed=0)
    importance = {"self": torch.rand(4, 6, generator=torch.Generator().manual_seed(0))}
    setups = [s for s in SETUPS if s.name in (REFERENCE, "q8_0 cache", "1/3 KV groups removed", "Q4_0 weights")]
    variants = buys_and_breaks.pruned_variants(model, importance, shares=[0, 1 / 3], units=["KV groups"])
    models = {share: m for (_, share), m in variants.items()}
    files = served_memory.export_files(models, setups, folder=tmp_path / "files", tokenizer_gguf=smollm2_gguf())
    assert sorted(files) == [(0.0, "f16"), (0.0, "q4_0"), (1 / 3, "f16")]
    memory = served_memory.memory_table(files, setups, cells=[128, 256])
    assert (memory["weight bytes"] == memory["weight bytes, predicted"]).all()
    assert ((memory["cache MiB"] - memory["cache bytes, predicted"] / 2**20).abs() <= 0.005 + 1e-9).all()
    ids = torch.randint(100, 40000, (4, 32), generator=torch.Generator().manual_seed(1))
    with served_memory.Served(files, setups, cells=32, threads=1) as served:
        scores = served.scores(ids, progress=False)
        speed = served.speed(ids[0, :8].tolist(), new_tokens=2, threads=[1], repeats=1)
        with pytest.raises(ValueError, match="need 34 cells; the contexts hold 32"):
            served.speed(ids[0].tolist(), new_tokens=2, threads=[1], repeats=1)  # the lab's 256 + 32 in 256, small
    assert len(scores) == 4 * len(setups) and (scores["tokens"] == 16).all()
    reference = scores[scores["setup"] == REFERENCE]
    assert (reference["kl"].abs() < 1e-9).all()
    assert (scores[scores["setup"] == "q8_0 cache"]["kl"] >= 0).all()
    assert set(speed["setup"]) == {s.name for s in setups}
    tables = served_memory.summaries(scores, memory, refused=served.refused, budgets=[1.0], n_resamples=50)
    kept = served_memory.keep_files(files, tables["14b_frontier"], out_dir=tmp_path / "kept")
    unbeaten = tables["14b_frontier"][tables["14b_frontier"]["unbeaten"]]
    assert sorted(p.name for p in kept) == sorted(set(unbeaten["file"]))
    assert all(p.exists() for p in kept)


def test_every_pair_of_setups_differs_in_its_file_or_its_cache():
    for a, b in itertools.combinations(served_memory.chosen_setups([s.name for s in served_memory.EXTRA_SETUPS]), 2):
        assert (a.file, a.cache) != (b.file, b.cache), (a.name, b.name)
    assert (
        Cache("q8_0", "q4_0").label == "K q8_0, V q4_0" and Cache("q4_0", "q4_0", False).label == "q4_0, no rotation"
    )
