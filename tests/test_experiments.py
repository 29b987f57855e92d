"""The chapters' experiment modules (helpers/book/experiments) on hand-made tables whose
answers are known: each count, table and summary follows its rows, one model and seed at a time."""

import math

import numpy as np
import pandas as pd
import pytest

from helpers.book.chapters import ch03_ablating_one_head as one_head
from helpers.book.chapters import ch04_keeping_one_head as keep_one
from helpers.book.chapters import ch05_cross_domain as cross_domain
from helpers.book.chapters import ch08_attention_kinds as attention_kinds
from helpers.book.chapters import ch09_training_dynamics as dynamics
from helpers.book.chapters import ch10_appendix_more_tasks as more_tasks
from helpers.book.experiments import pruning_runs as pruning


def _effects(kind_deltas: dict, significant: set, seed: int = 0, base: float = 10.0) -> pd.DataFrame:
    rows = []
    for kind, deltas in kind_deltas.items():
        for i, d in enumerate(deltas):
            rows.append(
                {
                    "kind": kind,
                    "layer": i // 2,
                    "heads": [i % 2],
                    "head": i % 2,
                    "delta": d,
                    "base": base,
                    "score": base + d,
                    "significant": (kind, i) in significant,
                    "training_seed": seed,
                    "score_even": base + d,
                    "score_odd": base + 2 * d,
                }
            )
    return pd.DataFrame(rows)


def test_one_head_counts_each_model_and_seed_on_its_own_rows():
    mt = pd.concat(
        [
            _effects({"enc_self": [-1, 0.5, 0, 0], "enc_dec": [-2, 0, 0, 0]}, {("enc_self", 0), ("enc_self", 1)}, 0),
            _effects({"enc_self": [-1, 0, 0, 0], "enc_dec": [-2, 0, 0, 0]}, {("enc_dec", 0)}, 1),
        ]
    )
    clf = _effects({"self": [0.1, 0, 0, 0]}, {("self", 0)}, 0)
    counts = one_head.counts([("nli", clf), ("translation", mt)])
    got = {(r.model, r.training_seed, r.kind): (r.heads, r.significant, r.significant_up) for r in counts.itertuples()}
    assert set(counts["layers"]) == {2}  # 4 heads of each kind in layers 0 and 1
    assert got == {
        ("nli", 0, "self"): (4, 1, 1),
        ("translation", 0, "enc_self"): (4, 2, 1),
        ("translation", 0, "enc_dec"): (4, 0, 0),
        ("translation", 1, "enc_self"): (4, 0, 0),
        ("translation", 1, "enc_dec"): (4, 1, 0),
    }
    assert not counts["from_paper"].any()
    table = one_head.with_paper(counts)
    paper = table[table["from_paper"].astype(bool)].iloc[0]
    assert (paper["heads"], paper["significant"], paper["significant_up"]) == (96, 8, 4)
    assert one_head.by_seed(table).loc[("translation", "enc_self"), "seed 0"] == "2 (1 up) of 4"
    both = one_head.both_measures(table, counts, alpha=0.01)
    assert len(both) == len(counts) and both["expected by chance"].tolist() == [0.08] * len(
        counts
    )  # 2 alpha: either direction


def _all_but_one(kind: str, layers: int, heads: int, delta_of, seed: int, set_name: str) -> pd.DataFrame:
    rows = []
    for layer in range(layers):
        for kept in range(heads):
            d = delta_of(layer, kept)
            rows.append(
                {
                    "kind": kind,
                    "layer": layer,
                    "heads": [h for h in range(heads) if h != kept],
                    "head": None,
                    "delta": d,
                    "base": 10.0,
                    "score": 10.0 + d,
                    "significant": d < -1,
                    "training_seed": seed,
                    "set": set_name,
                }
            )
    return pd.DataFrame(rows)


def test_keep_one_tables_choose_on_one_set_and_report_on_another():
    chosen = _all_but_one("enc_self", 2, 3, lambda layer, kept: -0.5 * kept, 0, "a")  # head 0 best on "a"
    reported = _all_but_one("enc_self", 2, 3, lambda layer, kept: -3.0 + kept, 0, "b")  # head 2 best on "b"
    ((same, other),) = keep_one.tables(pd.concat([chosen, reported]), "a", "a", "b").values()
    assert same["kept"].tolist() == [0, 0] and same["delta"].tolist() == [0.0, 0.0]
    assert other["delta"].tolist() == [-3.0, -3.0]  # head 0, chosen on "a", as "b" scores it
    summary = keep_one.summary(other, "mt", protocol="chosen on a, reported on b")
    assert summary == [
        {
            "source": "mt",
            "protocol": "chosen on a, reported on b",
            "kind": "enc_self",
            "layers": 2,
            "heads_per_layer": 3,
            "significant": 2,
            "significant_down": 2,
            "worst_layer": 1,
            "worst_delta": -3.0,
            "unit": "BLEU",
        }
    ]
    paper = keep_one.paper_counts()
    assert paper["from_paper"].all() and set(paper["protocol"]) == {"Table 2", "Table 3", "Table 5", "Table 6"}
    assert int(paper[paper["protocol"] == "Table 3"]["significant_down"].sum()) == 0  # no BERT layer drops (§3.3)
    assert set(zip(paper["source"], paper["heads_per_layer"])) == {("WMT", 16), ("BERT", 12)}


def test_cross_domain_correlations_pool_heads_and_bound_them_by_split_half():
    heads = np.arange(8)
    inside = _effects({"enc_self": list(heads * 0.1), "enc_dec": list(-heads * 0.2)}, set())
    outside = inside.assign(score=inside["score"] * 2 + 1, delta=inside["delta"] * 2)
    table = cross_domain.correlations([("mt", "translation", {0: (inside, outside)})])
    pooled = table[table["kind"] == "all"].iloc[0]
    assert pooled["pearson_r"] == pytest.approx(1.0) and pooled["heads"] == 16 and pooled["paper_r"] == 0.56
    assert set(table["kind"]) == {"all", "enc_self", "enc_dec"}
    assert pooled["split_half_r_in"] == pytest.approx(1.0)


def _curve(order: str, scores: list, model="m", track="translation", seed=0) -> pd.DataFrame:
    n = len(scores) - 1
    return pd.DataFrame(
        {
            "order": order,
            "pruned": range(n + 1),
            "share": [i / n for i in range(n + 1)],
            "score": scores,
            "model": model,
            "track": track,
            "training_seed": seed,
        }
    )


def test_pruning_summary_reads_the_share_prunable_and_averages_random_orders():
    curves = pd.concat(
        [
            _curve("importance", [10, 10, 9.5, 8, 0]),
            _curve("ablation", [10, 8, 7, 5, 0]),
            _curve("random 0", [10, 9.2, 6, 3, 0]),
            _curve("random 1", [10, 7, 6, 3, 0]),
        ]
    )
    summary = pruning.summarise(curves, pruning.TOLERANCE).set_index("order")
    assert summary.loc["importance", "prunable_share"] == 0.5  # within 1 BLEU up to 2 of 4 steps
    assert summary.loc["ablation", "prunable_share"] == 0.0
    assert summary.loc["random (mean)", "prunable_share"] == pytest.approx(0.125)  # 0.25 and 0
    # the band: the 5th and 95th percentiles of the two orders' shares (linear between them)
    assert summary.loc["random (5%)", "prunable_share"] == pytest.approx(0.0125)
    assert summary.loc["random (95%)", "prunable_share"] == pytest.approx(0.2375)
    assert (summary.loc[["random (mean)", "random (5%)", "random (95%)"], "random_orders"] == 2).all()
    assert summary.loc["importance", "paper_prunable_share"] == 0.2 and pd.isna(
        summary.loc["ablation", "paper_prunable_share"]
    )
    assert summary.loc["importance", "at_50%"] == 9.5 and summary.loc["importance", "all_pruned"] == 0


def test_attention_kinds_summaries_read_80_percent_and_the_perplexity_ratio():
    curves = pd.concat(
        [
            _curve(kind, [20, 19, 18, 12, 4, 1])  # shares 0, .2, .4, .6, .8, 1
            for kind in ("enc_self", "enc_dec")
        ]
    ).rename(columns={"order": "kind"})
    summary = attention_kinds.summary(curves).set_index("kind")
    assert (
        summary.loc["enc_dec", "relative_80%"] == pytest.approx(0.2)
        and summary.loc["enc_dec", "bleu_40%_pruned"] == 18
    )
    assert summary.loc["enc_self", "paper_relative_80%"] == pytest.approx(30 / 36.05, abs=0.05)
    ll = attention_kinds.likelihood_summary(
        pd.concat([_curve("enc_dec", [-2, -2, -2, -2, -2.5, -3])]).rename(columns={"order": "kind"})
    )
    assert ll["perplexity_ratio_80%"].iloc[0] == pytest.approx(math.exp(0.5))


def test_more_tasks_summary_uses_each_metrics_tolerance_and_the_papers_task():
    curves = pd.concat(
        [
            _curve("importance", [0.9, 0.895, 0.85, 0.5, 0.3], model="sentiment").assign(
                task="sentiment", metric="accuracy"
            ),
            _curve("importance", [20, 19.5, 18, 10, 1], model="translation").assign(task="translation", metric="BLEU"),
        ]
    )
    summary = more_tasks.summarise(curves).set_index("model")
    assert summary.loc["sentiment", "prunable_share"] == 0.25 and summary.loc["translation", "prunable_share"] == 0.25
    assert summary.loc["sentiment", "paper_task"] == "SST-2"


def test_dynamics_progress_table_gives_each_epoch_its_share_of_the_last():
    bleu = pd.DataFrame(
        {
            "training_seed": 0,
            "epoch": [1, 1, 2, 2],
            "share": [0, 0.4, 0, 0.4],
            "unpruned": [5.0, 5.0, 20.0, 20.0],
            "relative": [1, 0.5, 1, 0.9],
        }
    )
    table = dynamics.progress_table(bleu, "mt")
    assert table.loc["ours (mt, seed 0)", 1] == "5.0 (25%)" and table.loc["ours (mt, seed 0)", 2] == "20.0 (100%)"
    ll = pd.DataFrame(
        {"training_seed": 0, "epoch": [1, 1, 2, 2], "share": [0, 0.4, 0, 0.4], "perplexity_ratio": [1, 1.5, 1, 1.1]}
    )
    assert dynamics.usable_epochs(bleu, min_base_share=0.3) == [2]  # epoch 1's BLEU is 25% of the last one's
    assert dynamics.at_share_by_epoch(ll, "perplexity_ratio").tolist() == [1.5, 1.1]


def test_unmasked_scores_are_read_per_run_and_set():
    runs = pd.concat(
        [_effects({"self": [0, 0]}, set(), seed=0, base=0.73), _effects({"self": [0, 0]}, set(), seed=1, base=0.7345)]
    )
    assert one_head.base_scores(runs, 3) == "0: 0.730, 1: 0.735"
    sets = pd.concat(
        [
            _all_but_one("enc_self", 1, 2, lambda layer, kept: 0, 0, "a"),
            _all_but_one("enc_self", 1, 2, lambda layer, kept: 0, 0, "b").assign(base=12.0),
        ]
    )
    assert keep_one.unmasked(sets, ["a", "b"], 1) == "0: a 10.0, b 12.0"


def test_the_papers_tables_beside_ours_keep_the_papers_cells():
    grid = one_head.paper_table1()
    assert grid.shape == (6, 16) and grid.index[0] == "layer 1"
    assert sum(cell.endswith("*") for cell in grid.to_numpy().ravel()) == 8  # Table 1: 8 of 96 significant
    ours = _all_but_one("enc_self", 6, 2, lambda layer, kept: -0.1 * kept, 0, "a")
    side = keep_one.beside_paper(keep_one.tables(ours, "a", "a", "a")[0][0], 2)
    assert set(side.columns.get_level_values(0)) == {"ours", "paper Table 2"}


def test_one_head_counts_place_each_head_against_the_margin_of_its_score():
    effects = _effects({"enc_self": [-3, -0.2, 0.1, 2]}, {("enc_self", 0)}, 0)
    effects = effects.assign(delta_low=[-4, -0.5, -1.5, 1.5], delta_high=[-2, 0.5, 0.2, 2.5])
    row = one_head.counts([("translation", effects)], {"BLEU": 1.0})
    assert row[["margin", "harmful", "negligible", "helpful", "undetermined", "unplaced"]].iloc[0].tolist() == [
        1.0,
        1,
        1,
        1,
        1,
        1,
    ]
    assert int(row[["harmful", "negligible", "helpful", "undetermined"]].sum(axis=1).iloc[0]) == int(
        row["heads"].iloc[0]
    )
    wide = one_head.counts([("translation", effects)], {"BLEU": 5.0})  # every interval inside ±5
    assert int(wide["negligible"].iloc[0]) == 4
    nats = one_head.counts([("translation", effects)], {"perplexity": 0.01}, "likelihood")
    assert nats["margin"].iloc[0] == pytest.approx(math.log(1.01))
    accuracy = one_head.counts(
        [
            (
                "nli",
                _effects({"self": [0.0, -0.05]}, set()).assign(delta_low=[-0.005, -0.06], delta_high=[0.005, -0.04]),
            )
        ],
        {},
    )
    assert accuracy[["margin", "negligible", "harmful"]].iloc[0].tolist() == [0.01, 1, 1]
    with pytest.raises(ValueError, match="unknown margin"):
        one_head.counts([("translation", effects)], {"bleu": 1.0})


def test_keep_one_summary_counts_the_layers_beyond_the_margin():
    rows = _all_but_one("enc_self", 3, 2, lambda layer, kept: -2.0 * layer, 0, "a")
    rows = rows.assign(
        delta_low=rows["delta"] - 0.5, delta_high=rows["delta"] + 0.5
    )  # layer 0: ±0.5, 1: -2.5..-1.5, 2: -4.5..-3.5
    best = keep_one.tables(rows, "a", "a", "a")[0][0]
    (row,) = keep_one.summary(best, "mt", protocol="chosen and reported on a", margins={"BLEU": 1.0})
    assert (row["margin"], row["harmful"], row["negligible"]) == (1.0, 2, 1)
    (row,) = keep_one.summary(
        best, "mt", protocol="chosen and reported on a", likelihood=True, margins={"perplexity": 0.01}
    )
    assert (row["harmful"], row["negligible"]) == (2, 0) and row["margin"] == pytest.approx(math.log(1.01))
    assert "harmful" not in keep_one.summary(best, "mt", protocol="chosen and reported on a")[0]


# ---- chapter 12: removal kinds and selection methods ------------------------------------------
def _removal_effects(deltas: dict, seed: int = 0) -> pd.DataFrame:
    """``{removal: [delta per head]}`` as effect rows of one kind with a ±0.05 interval."""
    rows = []
    for removal, ds in deltas.items():
        for i, d in enumerate(ds):
            rows.append(
                {
                    "kind": "self",
                    "layer": i // 4,
                    "head": i % 4,
                    "heads": [i % 4],
                    "delta": d,
                    "base": 1.0,
                    "score": 1.0 + d,
                    "significant": abs(d) > 0.1,
                    "delta_low": d - 0.05,
                    "delta_high": d + 0.05,
                    "training_seed": seed,
                    "removal": removal,
                }
            )
    return pd.DataFrame(rows)


def test_removal_agreement_is_spearman_and_the_shared_most_important_heads():
    from scipy.stats import spearmanr

    from helpers.book.chapters import ch12_unimportant_or_unmeasured as removal_kinds

    rng = np.random.default_rng(0)
    zero = rng.normal(size=24)
    mean = zero + rng.normal(scale=0.5, size=24)
    resample = -zero  # the opposite ranking
    table = removal_kinds.agreement([("m", _removal_effects({"zero": zero, "mean": mean, "resample": resample}))])
    got = table.set_index("kinds")
    assert got.loc["zero vs mean", "spearman"] == pytest.approx(spearmanr(zero, mean).statistic)
    assert got.loc["zero vs resample", "spearman"] == pytest.approx(-1.0)
    top_zero, top_mean = set(np.argsort(zero)[:10]), set(np.argsort(mean)[:10])
    assert got.loc["zero vs mean", "top 10 shared"] == len(top_zero & top_mean)
    assert got.loc["zero vs resample", "top 10 shared"] == len(top_zero & set(np.argsort(resample)[:10]))


def test_removal_counts_classify_each_kind_and_leave_a_seedless_model_without_seed():
    from helpers.book.chapters import ch12_unimportant_or_unmeasured as removal_kinds

    effects = _removal_effects({"zero": [0.0, 0.0, -0.5, 0.3, 0.0, 0.0, 0.08, 0.0], "mean": [0.0] * 8})
    counts = removal_kinds.counts_by_removal(
        [("m", effects), ("lm", effects)], {"accuracy": 0.1}, "metric", seedless=["lm"]
    )
    table = removal_kinds.class_table(counts[counts["model"] == "m"]).set_index("removal")
    # zero: |delta| + 0.05 within 0.1 for 6 heads; -0.5 harmful; +0.3 helpful; 0.08 straddles +0.1
    assert table.loc["zero", ["negligible", "harmful", "helpful", "undetermined", "significant"]].tolist() == [
        5,
        1,
        1,
        1,
        2,
    ]
    assert table.loc["mean", "negligible"] == 8
    assert counts.loc[counts["model"] == "lm", "training_seed"].isna().all()
    assert (counts.loc[counts["model"] == "m", "training_seed"] == 0).all()


def test_a_language_model_grid_becomes_effects_in_nats():
    from helpers.book.chapters import ch12_unimportant_or_unmeasured as removal_kinds

    grid = pd.DataFrame(
        {
            "layer": [0, 0],
            "head": [0, 1],
            "change_pct": [10.0, -5.0],
            "p_value": [0.001, 0.5],
            "significant": [True, False],
            "delta_low": [-0.1, -0.01],
            "delta_high": [-0.08, 0.06],
        }
    )
    effects = removal_kinds.language_model_effects(grid, "mean")
    assert effects["delta"].tolist() == pytest.approx([-math.log(1.1), -math.log(0.95)])
    assert set(effects["removal"]) == {"mean"} and effects["heads"].tolist() == [[0], [1]]


def test_selection_summary_reads_share_and_area_per_method():
    from helpers.book.chapters import ch12_unimportant_or_unmeasured as selection

    curves = pd.concat(
        [
            _curve("importance", [10, 10, 9.5, 8, 0]),
            _curve("L0 gates", [10, 10, 10, 9.2, 1]),
            _curve("random 0", [10, 9.2, 6, 3, 0]),
            _curve("random 1", [10, 7, 6, 3, 0]),
            _curve("ablation", [10, 8, 7, 5, 0], seed=0),
            _curve("L0 gates", [10, 9, 8, 7, 0], seed=1),
            _curve("importance", [10, 10, 10, 10, 10], seed=1),
        ]
    )
    table = selection.summary(curves, {"BLEU": 1.0}, "metric").set_index(["training_seed", "method"])
    assert table.loc[(0, "L0 gates"), "prunable_share"] == 0.75
    assert table.loc[(0, "importance"), "prunable_share"] == 0.5
    assert table.loc[(0, "random (mean)"), "prunable_share"] == pytest.approx(0.125)
    # trapezoid of (score - 10) over shares 0, .25, .5, .75, 1: importance (0, 0, -0.5, -2, -10)
    assert table.loc[(0, "importance"), "area"] == pytest.approx(-(0.25 * (0.25 + 1.25 + 6)))
    assert table.loc[(0, "random (95%)"), "prunable_share"] == pytest.approx(0.2375)  # of 0.25 and 0
    spread = selection.spread(table.reset_index()).set_index(["model", "method"])
    assert spread.loc[("m", "importance"), "prunable share (mean)"] == pytest.approx(0.75)
    assert spread.loc[("m", "importance"), "prunable_share range"] == pytest.approx(0.5)


class _Sweeps:
    """Just what ``PruningRuns`` reads to pick its sets: a split of 40 numbered examples."""

    def __init__(self, decoded_examples=0):
        self.decoded_examples = decoded_examples

    def data(self, name):
        return {"test": list(range(100, 140)), "train": list(range(500, 600))}

    def decoded(self, pairs):
        from helpers.book import course

        return course.subset(pairs, self.decoded_examples)


def test_the_ablation_order_and_the_curves_use_disjoint_halves_of_the_split():
    runs = pruning.PruningRuns(_Sweeps(decoded_examples=10), "nli", "test", "mt", "test", importance_split="train")
    held, scored = runs.halves(40)
    assert len(held) == len(scored) == 20 and not set(held) & set(scored) and sorted(held + scored) == list(range(40))
    for name, measure in (("nli", "metric"), ("mt", "likelihood"), ("mt", "metric")):  # mt metric: the decoded pairs
        examples, positions = runs.ablation_sweep(name, "test", measure)
        curves_score, _ = runs._sets(name, "test")
        swept = runs.sweeps.decoded(examples) if (name, measure) == ("mt", "metric") else examples
        ablation_reads = {swept[k] for k in positions}
        assert ablation_reads and not ablation_reads & set(curves_score), (name, measure)
        assert len(examples) == 40 and len(swept) == (10 if (name, measure) == ("mt", "metric") else 40)
    assert runs.selected_on("nli")["ablation"] == "held-out half of test"
    in_sample = pruning.PruningRuns(_Sweeps(), "nli", "test", "mt", "test", held_out_ablation=False)
    examples, positions = in_sample.ablation_sweep("nli", "test", "metric")
    assert positions is None and in_sample._sets("nli", "test")[0] == examples
    assert in_sample.selected_on("nli")["ablation"] == pruning.IN_SAMPLE


def test_the_protocol_beside_figure_3_flips_the_ablation_order_and_keeps_the_estimated_importance():
    runs = pruning.PruningRuns(_Sweeps(), "nli", "test", "mt", "test", held_out_ablation=False, random_orders=20)
    runs._loaded.update({"run-a": ("model", None, "I_h"), ("model", "run-a"): ("model", None, "scorers of the set")})
    other = runs.beside()
    assert (runs.protocol, other.protocol) == ("in_sample", "held_out")
    assert other.held_out_ablation and other.random_count("nli", "metric") == other.random_count("mt", "metric") == 0
    assert not other.reestimate and other.beside().protocol == "in_sample"
    # I_h is shared; the scorers, built on the set the curves score, are not (the sets differ)
    assert other._loaded == {"run-a": ("model", None, "I_h")} and other._loaded is not runs._loaded
    assert len(other._sets("nli", "test")[0]) == 20 and len(runs._sets("nli", "test")[0]) == 40


def test_the_other_protocols_tables_are_its_curves_and_shares_on_both_measures(monkeypatch):
    from helpers.book.chapters.ch06_pruning_curves import protocol_names, protocol_tables
    from helpers.book.experiments.sweeps import MEASURES

    def curves(self, measure="metric"):
        assert measure in MEASURES, measure  # what HeadSweeps accepts
        return pd.DataFrame({"measure": [measure], "protocol": [self.protocol], "orders": [self.random_orders]})

    monkeypatch.setattr(pruning.PruningRuns, "all_curves", curves)
    monkeypatch.setattr(pruning.PruningRuns, "summary", lambda self, c, measure="metric": c.assign(summary=measure))
    runs = pruning.PruningRuns(_Sweeps(), "nli", "test", "mt", "test", held_out_ablation=False)
    tables = protocol_tables(runs)
    assert set(tables) <= set(protocol_names()) and len(tables) == 4
    for name, table in tables.items():
        assert name.endswith("_likelihood") == (table["measure"].iloc[0] == "likelihood")
        assert "_held_out" in name and table["protocol"].iloc[0] == "held_out" and table["orders"].iloc[0] == 0
    assert "summary" in tables["06_prunable_shares_held_out_likelihood"]


def test_a_run_that_no_longer_makes_a_table_removes_it(tmp_path, monkeypatch):
    from helpers.book.chapters.ch06_pruning_curves import protocol_names
    from helpers.book.store.results import remove_tables, save_tables, saved_table

    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path))
    names = protocol_names()
    assert len(names) == len(set(names)) == 8 and "06_prunable_shares_held_out_likelihood" in names
    save_tables("p", {name: pd.DataFrame({"x": [1]}) for name in names[:2]})
    removed = remove_tables("p", set(names) - {names[0]})
    assert [path.name for path in removed] == [f"{names[1]}.csv"]
    assert saved_table("p", names[0]) is not None and saved_table("p", names[1]) is None
    # a run starts by clearing every protocol table: one that stops before it saves its own leaves
    # none for the rule to read beside its new Figure 3
    from helpers.book.chapters.ch06_pruning_curves import clear_protocol_tables

    save_tables("p", {"06_prunable_shares": pd.DataFrame({"x": [1]})})
    assert [path.name for path in clear_protocol_tables("p")] == [f"{names[0]}.csv"]
    assert all(saved_table("p", name) is None for name in names) and saved_table("p", "06_prunable_shares") is not None


def test_a_grid_at_a_calibrated_level_of_0_shows_no_head_beyond_a_margin():
    # at level 0 no p-value is small enough, so no head is significant; the old counts still
    # called a head whose interval (the resamples' whole range) lay beyond -δ harmful
    from helpers.book.chapters import ch11_nine_heads as lm

    heads = [
        {"layer": 0, "head": 0, "change_pct": 5.0, "p_value": 0.0, "delta_low": -0.08, "delta_high": -0.03},
        {"layer": 0, "head": 1, "change_pct": 0.1, "p_value": 0.6, "delta_low": -0.002, "delta_high": 0.003},
        {"layer": 0, "head": 2, "change_pct": -4.0, "p_value": 0.0, "delta_low": 0.03, "delta_high": 0.07},
    ]
    grid = pd.DataFrame(heads).assign(significant=False, level=0.0)
    (row,) = lm.grid_counts(grid, alpha=0.01).to_dict("records")
    assert row["level"] == 0 and row["significantly worse"] == row["significantly better"] == 0
    assert (row["harmful"], row["helpful"], row["negligible"]) == (0, 0, 1)
    assert row["undetermined"] == row["unplaced"] == 2
    # at a level above 0 the same intervals place the heads beyond the margin
    (row,) = lm.grid_counts(grid.assign(level=0.002, significant=grid["p_value"] < 0.002), alpha=0.01).to_dict(
        "records"
    )
    assert (row["harmful"], row["helpful"], row["significantly worse"]) == (1, 1, 1)
