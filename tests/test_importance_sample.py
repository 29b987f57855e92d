"""How many examples importance needs (experiments/importance_sample.py): agreement read off
stored per-example terms equals agreement computed from scratch, and behaves as sampling must."""

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import spearmanr

from helpers.book.experiments import importance_sample as sample


def _terms(examples: int = 200, layers: int = 4, heads: int = 6, noise: float = 1.0, seed: int = 0) -> dict:
    """Per-example terms around a true importance per head, with noise per example."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0.5, 2.0, (layers, heads))
    return {"self": torch.tensor(np.abs(truth + rng.normal(0, noise, (examples, layers, heads))))}


def test_edge_overlap_counts_shared_heads_by_hand():
    a = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    b = np.array([0.2, 0.1, 0.9, 0.4, 0.5, 0.6, 0.7, 0.8, 0.3, 1.0])
    assert sample.edge_overlap(a, b, share=0.2) == 1.0  # {0, 1} both times
    assert sample.edge_overlap(a, b, share=0.3) == pytest.approx(2 / 3)  # {0, 1, 2} against {0, 1, 8}
    assert sample.edge_overlap(a, b, share=0.2, top=True) == 0.5  # {9, 8} against {9, 2}


def test_the_table_equals_importance_recomputed_on_each_drawn_subset():
    terms = _terms()
    table = sample.agreement_table(terms, sizes=(10, 50, 500), draws=3, seed=4)
    assert table["examples"].tolist() == [10, 10, 10, 50, 50, 50, 200]  # 500 is more than there are: all, once
    rng = np.random.default_rng(4)
    whole = terms["self"].mean(0)
    whole = (whole / whole.norm(dim=-1, keepdim=True)).flatten().numpy()
    for row in table.to_dict("records"):
        picked = np.sort(rng.choice(200, size=row["examples"], replace=False))
        part = terms["self"][picked].mean(0)
        part = (part / part.norm(dim=-1, keepdim=True)).flatten().numpy()
        assert row["spearman"] == pytest.approx(spearmanr(part, whole).statistic, abs=1e-12)
        k = round(0.1 * 24)
        low = lambda s, k=k: set(np.argsort(s, kind="stable")[:k])
        assert row["bottom overlap"] == len(low(whole) & low(part)) / k
    assert table.iloc[-1][["spearman", "top overlap", "bottom overlap"]].tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_agreement_grows_with_the_sample_and_falls_with_the_noise():
    table = sample.agreement_table(_terms(noise=1.0), sizes=(4, 16, 64), draws=20, seed=0)
    medians = table.groupby("examples")["spearman"].median()
    assert medians.is_monotonic_increasing and medians.iloc[0] < 0.9 < medians.iloc[-1]
    noisier = sample.agreement_table(_terms(noise=4.0), sizes=(16,), draws=20, seed=0)["spearman"].median()
    assert noisier < medians.loc[16]
    shown = sample.summary(table.assign(model="m"))
    assert list(shown["examples"]) == [4, 16, 64] and "spearman (median)" in shown
    assert shown["spearman (median)"].tolist() == pytest.approx(medians.tolist())


def test_the_figure_draws_a_band_per_model_and_marks_the_samples_used():
    import matplotlib

    matplotlib.use("Agg")
    table = pd.concat(
        [
            sample.agreement_table(_terms(seed=s), (4, 16), draws=5, seed=s).assign(model=m)
            for s, m in ((0, "a"), (1, "b"))
        ]
    )
    fig = sample.figure(table, used={"chapter 06": 16})
    assert [len(ax.lines) for ax in fig.axes] == [3, 3]  # two models and the mark, per panel
    assert len(fig.axes[0].collections) == 2  # one band per model


def test_chapter_06_draws_chapter_11s_verses_with_chapter_11s_defaults():
    """Chapter 06 measures the language model's I_h on chapter 11's select set: where a profile
    sets nothing, its draw uses chapter 11's own parameter defaults."""
    import ast
    from pathlib import Path

    import papermill as pm

    from helpers.book.experiments.pruning_runs import LM_SETS

    declared = pm.inspect_notebook(str(Path(__file__).parents[1] / "notebooks" / "11_nine_heads.ipynb"))
    assert LM_SETS == {name: ast.literal_eval(declared[name]["default"]) for name in LM_SETS}


def test_the_first_draws_of_each_size_prune_by_their_own_importance():
    """``prunable`` receives exactly the I_h of the draw (the same draws the agreement reads), only
    for the first ``curve_draws`` draws of each size; the full sample's I_h is the whole's."""
    terms = _terms()
    seen = []

    def prunable(scores):
        seen.append(scores["self"].clone())
        return float(scores["self"].flatten().argmin()) / 24  # a share that depends on the order

    table = sample.agreement_table(terms, sizes=(10, 50, 200), draws=4, seed=4, prunable=prunable, curve_draws=2)
    with_curve = table.dropna(subset=["prunable_share"])
    assert with_curve[["examples", "draw"]].values.tolist() == [[10, 0], [10, 1], [50, 0], [50, 1], [200, 0]]
    from helpers.heads.importance import from_terms

    rng = np.random.default_rng(4)  # the table's own draws, in its order
    picks = [np.sort(rng.choice(200, size=n, replace=False)) for n in (10,) * 4 + (50,) * 4 + (200,)]
    expected = [from_terms(terms, picks[i].tolist())["self"] for i in (0, 1, 4, 5, 8)]
    assert all(torch.equal(a, b) for a, b in zip(seen, expected))
    assert torch.equal(seen[-1], from_terms(terms)["self"])
    assert table["prunable_share"].isna().sum() == 4  # draws 2 and 3 of the two smaller sizes
    import matplotlib

    matplotlib.use("Agg")
    fig = sample.figure(table.assign(model="m"), used={"all": 200})
    assert len(fig.axes) == 3 and len(fig.axes[2].collections) == 1  # the curves' panel: one model's dots


def test_curve_points_add_their_columns_to_the_drawn_curves_only():
    """``curve_points`` (a language model's perplexity at fixed shares) gets the same I_h as
    ``prunable`` and fills its columns for the first ``curve_draws`` draws of each size; the
    figure draws them in a panel of their own."""
    terms = _terms()
    calls = []

    def points(scores):
        calls.append(scores["self"].clone())
        first = float(scores["self"].flatten().argmin())
        return {sample.rise_column(0.1): first, sample.rise_column(0.3): 2 * first}

    assert sample.rise_column(0.1) == "perplexity rise at 10% pruned (%)"  # the name the findings and checks read

    table = sample.agreement_table(terms, sizes=(10, 200), draws=3, seed=1, curve_points=points, curve_draws=2)
    drawn = table.dropna(subset=["perplexity rise at 10% pruned (%)"])
    assert drawn[["examples", "draw"]].values.tolist() == [[10, 0], [10, 1], [200, 0]] and len(calls) == 3
    assert (drawn["perplexity rise at 30% pruned (%)"] == 2 * drawn["perplexity rise at 10% pruned (%)"]).all()
    assert table["prunable_share"].isna().all()  # no prunable given: its column stays empty
    import matplotlib

    matplotlib.use("Agg")
    fig = sample.figure(table.assign(model="lm"), used={"all": 200})
    assert len(fig.axes) == 3 and len(fig.axes[2].lines) == 2 and len(fig.axes[2].collections) == 2  # a line per share
