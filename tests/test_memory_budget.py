"""Chapter 14's plumbing: the long texts and where their probe sits, which configuration each
method gets at each budget, and the tables' choices, on a tiny Llama and a word-level tokenizer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from helpers.book.chapters import ch14_memory_budget as mb
from helpers.zoo import long_texts
from helpers.zoo.long_texts import Layout


class Words:
    """A tokenizer that numbers words by a hash: enough for drawing and cutting texts."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [hash(w) % 1000 for w in text.split()]}


def test_a_layout_places_the_prompt_the_scored_half_and_the_repeat():
    layout = Layout(chapter_tokens=16, repeat_tokens=4, passage_start=2)
    assert (layout.total, layout.prompt) == (20, 7)
    assert layout.perplexity_targets().tolist() == list(
        range(8, 16)
    )  # the later half, each predicted after the prompt
    assert layout.copy_targets().tolist() == [17, 18, 19]  # the repeat's tokens 2..4
    assert layout.first_read_targets().tolist() == [3, 4, 5]  # the same tokens when first read
    with pytest.raises(ValueError, match="first half"):
        Layout(chapter_tokens=16, repeat_tokens=8, passage_start=2)


def test_chapters_are_drawn_whole_apart_from_the_excluded_and_end_with_their_passage():
    layout = Layout(chapter_tokens=40, repeat_tokens=6, passage_start=3)
    every = long_texts.chapter_token_ids(Words())
    excluded = set(list(every)[:500])
    drawn = long_texts.draw_chapters(Words(), {"a": 5, "b": 7}, layout=layout, exclude=excluded, seed=3)
    assert drawn["a"].shape == (5, 46) and drawn["b"].shape == (7, 46)
    rows = {tuple(r) for split in drawn.values() for r in split.tolist()}
    assert len(rows) == 12  # twelve different chapters
    starts = {key: ids[:40] for key, ids in every.items() if len(ids) >= 40}
    for row in rows:
        key = next(k for k, ids in starts.items() if tuple(ids) == row[:40])
        assert key not in excluded
        assert list(row[40:]) == list(row[3:9])  # the passage, repeated
    again = long_texts.draw_chapters(Words(), {"a": 5, "b": 7}, layout=layout, exclude=excluded, seed=3)
    assert torch.equal(again["a"], drawn["a"])
    with pytest.raises(ValueError, match="ask for fewer"):
        long_texts.draw_chapters(Words(), {"a": 5000}, layout=layout)


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=6,
        num_key_value_heads=3,
        max_position_embeddings=128,
    )
    return LlamaForCausalLM(config).eval()


def test_each_method_gets_the_most_it_can_hold_within_each_budget(model):
    layout = Layout(chapter_tokens=48, repeat_tokens=8, passage_start=2)
    importance = {"self": torch.rand(4, 6, generator=torch.Generator().manual_seed(0))}
    scores = pd.DataFrame(
        [{"layer": i, "group": g, "beyond window": float((i * 3 + g) * 7 % 12)} for i in range(4) for g in range(3)]
    )
    plan = mb.Plan(
        budgets=(0.9, 0.5, 0.25), evict_budgets=(0.5,), combo_budgets=(0.5,), sinks=2, window=6, band_orders=4
    )
    configs = mb.plan(model, importance, window_scores=scores, layout=layout, p=plan)
    shares = {c.name: mb.bytes_share(model, c, layout)[1] for c in configs}
    groups = 12
    for c in configs:
        if c.method in (mb.REMOVED, mb.WINDOWED, mb.EVICTED):
            assert shares[c.name] <= c.target + mb.FIT, c.name
    removed = [c for c in configs if c.method == mb.REMOVED]
    from helpers.heads.grouped_query import kv_group_order

    order = kv_group_order(model, importance)
    for c in removed:  # the least important groups go, and one group more would not fit
        kept = int(c.setting.split()[0])
        assert set(c.removed) == set(mb.heads_of_groups(model, order[: groups - kept]))
        more = mb.Config(mb.REMOVED, "", c.target, mb.heads_of_groups(model, order[: groups - kept - 1]))
        assert kept == groups or mb.bytes_share(model, more, layout)[1] > c.target + mb.FIT
    for c in (c for c in configs if c.method == mb.WINDOWED):  # full context where the score is highest
        chosen = mb.chosen_groups(c)
        ranked = scores.sort_values("beyond window", ascending=False, kind="stable")
        assert set(chosen) == {(int(r.layer), int(r.group)) for r in ranked.head(len(chosen)).itertuples()}
    band = [c for c in configs if c.method == mb.RANDOM]
    assert len(band) == 4 and len({c.removed for c in band}) == 4
    half = next(c for c in removed if c.target == 0.5)
    assert all(len(c.removed) == len(half.removed) or shares[c.name] <= 0.5 + mb.FIT for c in band)


def test_fitting_takes_each_methods_largest_configuration_within_the_budget():
    points = pd.DataFrame(
        [
            {"method": m, "setting": s, "bytes share": b, "perplexity": p}
            for m, s, b, p in [
                (mb.QUANTIZED, "8", 0.5001, 10.0),
                (mb.QUANTIZED, "4", 0.36, 10.2),
                (mb.QUANTIZED, "2", 0.25, 11.0),
                (mb.REMOVED, "45", 0.5, 14.0),
                (mb.REMOVED, "67", 0.75, 11.0),
                (mb.UNPRUNED, "-", 1.0, 10.0),
            ]
        ]
    )
    fit = mb.fitting(points, 0.5).set_index("method")["setting"].to_dict()
    assert fit == {mb.QUANTIZED: "8", mb.REMOVED: "45"}
    assert mb.fitting(points, 0.3).set_index("method")["setting"].to_dict() == {mb.QUANTIZED: "2"}


def test_pairs_are_paired_over_sequences_and_signed_by_the_better_method():
    rng = np.random.default_rng(0)
    base = np.column_stack(
        [rng.normal(100, 5, 40), np.full(40, 50.0), np.full(40, 5.0), np.full(40, 7.0), np.zeros(40)]
    )
    worse = base.copy()
    worse[:, 0] += 1.0  # one nat more per sequence: 0.02 per token, on every sequence
    rows = {f"{mb.QUANTIZED}: q": base, f"{mb.REMOVED}: r": worse}
    points = pd.DataFrame(
        [
            {"method": mb.QUANTIZED, "setting": "q", "bytes share": 0.5, "perplexity": 1.0},
            {"method": mb.REMOVED, "setting": "r", "bytes share": 0.5, "perplexity": 2.0},
        ]
    )
    pairs = mb.pair_table(points, rows, budgets=[0.5], n_resamples=200, alpha=0.01, seed=0)
    row = pairs.iloc[0]
    assert (row["better"], row["worse"]) == (mb.QUANTIZED, mb.REMOVED)
    # a constant paired shift has no spread over resamples: the interval is the point
    assert row["log-perplexity gap"] == pytest.approx(0.02) and row["gap low"] == pytest.approx(0.02)


def test_every_configuration_a_fast_pass_stands_in_for_is_checked_and_one_of_heavy_hitters(model):
    # the course used to check one configuration per method: every cheap one now
    layout = Layout(chapter_tokens=48, repeat_tokens=8, passage_start=2)
    importance = {"self": torch.rand(4, 6, generator=torch.Generator().manual_seed(0))}
    scores = pd.DataFrame(
        [{"layer": i, "group": g, "beyond window": float(i + g)} for i in range(4) for g in range(3)]
    )
    plan = mb.Plan(
        budgets=(0.9, 0.5, 0.25), evict_budgets=(0.5, 0.25), combo_budgets=(0.5,), sinks=2, window=6, band_orders=2
    )
    configs = mb.plan(model, importance, window_scores=scores, layout=layout, p=plan)
    checked = mb.checked(configs, 0.5)
    cheap = [c for c in configs if c.method not in (mb.RANDOM, mb.EVICTED)]
    assert [c for c in checked if c.method != mb.EVICTED] == cheap
    assert [(c.method, c.target) for c in checked if c.method == mb.EVICTED] == [(mb.EVICTED, 0.5)]
    assert {mb.UNPRUNED, mb.REMOVED, mb.WINDOWED, mb.QUANTIZED, mb.COMBINED} <= {c.method for c in checked}
    # float32 too: the plain cache, every quantized one, and one of each other fast pass at the budget
    exact = mb.exact_checked(configs, 0.5)
    want = {c.name for c in configs if c.method in (mb.UNPRUNED, mb.QUANTIZED)}
    for method in (mb.REMOVED, mb.WINDOWED, mb.COMBINED):  # the one sized to the budget, else the first
        mine = [c for c in configs if c.method == method]
        want.add(next((c for c in mine if c.target == 0.5), mine[0]).name)
    assert exact == want and exact <= {c.name for c in checked}


def _checks(**gaps) -> pd.DataFrame:
    """A check table: per method, its 16-bit and float32 largest sequence gaps."""
    rows = []
    for method, (g16, g32) in gaps.items():
        name = {"unpruned": mb.UNPRUNED, "removed": mb.REMOVED, "quantized": mb.QUANTIZED}[method]
        rows.append(
            {
                "method": name,
                "setting": method,
                "bytes, measured": 10,
                "bytes, predicted": 10,
                "largest sequence gap, 16-bit": g16,
                "largest sequence gap, float32": g32,
            }
        )
    rows.append({"method": mb.EVICTED, "setting": "hh", "bytes, measured": 5, "bytes, predicted": 5})
    return pd.DataFrame(rows)


def test_the_tolerance_is_the_16_bit_caches_rounding_and_each_fast_pass_is_held_to_it():
    # the tolerance is the largest 16-bit gap of the caches that hold 16-bit values: the
    # quantized cache's own 16-bit gap (codes flipping) does not widen it
    checks = _checks(unpruned=(0.004, 1e-7), removed=(0.009, 1e-7), quantized=(0.05, 0.006))
    assert mb.fast_pass_tolerance(checks) == pytest.approx(0.009)
    assert mb.assert_fast_passes(checks) == pytest.approx(0.009)
    # a fast pass off by more than rounding, in float32, stops the chapter and is named
    off = _checks(unpruned=(0.004, 1e-7), removed=(0.005, 1e-7), quantized=(0.05, 0.006))
    with pytest.raises(ValueError, match="quantized 6.00e-03"):
        mb.assert_fast_passes(off)
    wrong = checks.copy()
    wrong.loc[wrong["method"] == mb.EVICTED, "bytes, measured"] = 6
    with pytest.raises(ValueError, match=r"bytes \['hh'\]"):
        mb.assert_fast_passes(wrong)
    with pytest.raises(ValueError, match="no plain cache"):
        mb.fast_pass_tolerance(checks[checks["method"] != mb.UNPRUNED])


def test_a_best_is_named_only_where_its_gap_exceeds_the_tolerance_and_its_interval_excludes_zero():
    points = pd.DataFrame(
        [
            {"method": mb.QUANTIZED, "setting": "q", "bytes share": 0.5, "perplexity": 10.0},
            {"method": mb.REMOVED, "setting": "r", "bytes share": 0.5, "perplexity": 10.1},
            {"method": mb.WINDOWED, "setting": "w", "bytes share": 0.25, "perplexity": 11.0},
            {"method": mb.EVICTED, "setting": "e", "bytes share": 0.25, "perplexity": 13.0},
        ]
    )
    pairs = pd.DataFrame(
        [
            {
                "budget": 0.5,
                "better": mb.QUANTIZED,
                "worse": mb.REMOVED,
                "log-perplexity gap": 0.01,
                "gap low": 0.004,
                "gap high": 0.02,
            },
            {
                "budget": 0.25,
                "better": mb.WINDOWED,
                "worse": mb.EVICTED,
                "log-perplexity gap": 0.17,
                "gap low": -0.01,
                "gap high": 0.3,
            },
            {
                "budget": 0.9,
                "better": mb.QUANTIZED,
                "worse": mb.REMOVED,
                "log-perplexity gap": 0.05,
                "gap low": 0.03,
                "gap high": 0.07,
            },
        ]
    )
    table = mb.budget_table(points, pairs, budgets=[0.9, 0.5, 0.25], tolerance=0.015).set_index("budget")
    assert not table.loc[0.5, "clear"]  # above 0, but within the tolerance
    assert not table.loc[0.25, "clear"]  # beyond the tolerance, but its interval holds 0
    assert table.loc[0.9, "clear"] and table.loc[0.9, "tolerance"] == 0.015
