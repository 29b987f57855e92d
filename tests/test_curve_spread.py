"""A pruning curve's summaries under resampled examples (sweeps/curve_spread.py, experiments/pruning_runs'
share_spreads): against the one-curve functions, brute-force resampling, and the scorers' own scores."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from helpers.book.experiments import pruning_runs as pruning
from helpers.heads.metrics import (
    METRICS,
    accuracy_from_stats,
    accuracy_stats,
    confusion_stats,
    f1_from_stats,
    matthews_from_stats,
)
from helpers.heads.significance import resample_indices
from helpers.sweeps.curve_spread import Spread, prunable_shares, relative_scores, resampled_curves
from helpers.sweeps.pruning_curves import prunable_share


def test_prunable_shares_of_many_curves_equal_the_one_curve_rule():
    rng = np.random.default_rng(0)
    shares = np.linspace(0, 1, 11)
    curves = 10 - np.cumsum(rng.exponential(0.4, (300, 11)), 1) + rng.normal(0, 0.3, (300, 11))
    curves[:5] = 10.0  # never drops: every share is prunable
    got = prunable_shares(curves, shares, 1.0)
    expected = [prunable_share(pd.DataFrame({"pruned": range(11), "share": shares, "score": c}), 1.0) for c in curves]
    assert got.tolist() == expected and got[0] == 1.0 and len(set(expected)) > 3
    with pytest.raises(ValueError, match="rise from 0"):
        prunable_shares(curves, shares[::-1], 1.0)


def test_relative_scores_read_one_step_over_the_unpruned():
    curves = np.array([[20.0, 10, 5], [0.0, 1, 1]])
    got = relative_scores(curves, 2)
    assert got[0] == 0.25 and np.isnan(got[1])


@pytest.mark.parametrize(
    "name, truth", [("accuracy", accuracy_score), ("matthews", matthews_corrcoef), ("f1", f1_score)]
)
def test_each_metric_from_summed_statistics_equals_scikit_learn(name, truth):
    """The one definition of each metric (per-example statistics, a score of their sums) against
    an independent implementation, on random labels and on the edge cases of an empty row or
    column of the confusion."""
    rng = np.random.default_rng(1)
    metric = METRICS[name]
    for pred, gold in [
        (rng.integers(0, 2, 80), rng.integers(0, 2, 80)),
        (np.zeros(20, int), rng.integers(0, 2, 20)),
        (np.ones(20, int), np.ones(20, int)),
    ]:
        expected = truth(gold, pred, **({} if name == "accuracy" else {"zero_division": 0.0} if name == "f1" else {}))
        assert metric.score(metric.stats(pred, gold).sum(0)) == pytest.approx(expected, abs=1e-12)
        assert metric(pred.tolist(), gold.tolist()) == metric(pred, gold)
    assert confusion_stats([1, 0, 1, 0], [1, 0, 0, 1]).tolist() == [
        [1, 0, 0, 0],
        [0, 1, 0, 0],
        [0, 0, 1, 0],
        [0, 0, 0, 1],
    ]
    assert matthews_from_stats(np.array([0, 5, 0, 3])) == 0.0 and f1_from_stats(np.array([0, 5, 2, 3])) == 0.0


def test_resampled_curves_equal_scoring_each_resample_by_hand():
    rng = np.random.default_rng(2)
    steps = [accuracy_stats(rng.random(40) < p, np.ones(40, bool)) for p in (0.9, 0.7, 0.4)]
    indices = resample_indices(40, 50, seed=3)
    got = resampled_curves(steps, accuracy_from_stats, indices)
    by_hand = np.array([[s[row].sum(0)[0] / 40 for s in steps] for row in indices])
    assert got.shape == (50, 3) and np.allclose(got, by_hand)
    whole = resampled_curves(
        steps, accuracy_from_stats, np.arange(40)[None, :]
    )  # the "resample" of every example once
    assert whole[0].tolist() == [accuracy_from_stats(s.sum(0)) for s in steps]
    with pytest.raises(ValueError, match="same examples"):
        resampled_curves([steps[0], steps[1][:30]], accuracy_from_stats, indices)


class _FakeScore:
    """Examples whose correctness under a head spec is drawn from how many heads it masks: each
    example has its own threshold, so a curve falls as heads go, differently per example."""

    def __init__(self, n: int, seed: int = 0):
        self.threshold = np.random.default_rng(seed).integers(6, 12, n)
        self.calls = 0
        self.from_stats = accuracy_from_stats

    def stats(self, model, specs):
        self.calls += 1
        masked = [sum(len(v) for layers in s.values() for v in layers.values()) for s in specs]
        # head (0, 0) costs every example whose threshold is 11: which heads go matters, not only how many
        hit = [
            any(0 in heads for layer, heads in layers.items() if layer == 0)
            for s in specs
            for layers in [s.get("self", {})]
        ]
        return [
            accuracy_stats(
                (self.threshold >= m) & ~(h & (self.threshold % 10 == 1)), np.ones(len(self.threshold), bool)
            )
            for m, h in zip(masked, hit)
        ]


def _order(heads: int) -> list[tuple[str, int, int]]:
    return [("self", h // 4, h % 4) for h in range(heads)]


def test_share_spreads_are_brute_force_resampling_of_the_whole_curve():
    score, order = _FakeScore(60), _order(10)
    bootstrap = pruning.Bootstrap(n_resamples=200, seed=5)
    importance = order[1:6] + order[:1] + order[6:]  # head (0, 0) goes at the 6th step here, at the last by ablation
    got = pruning.share_spreads(
        None,
        {"importance": importance, "ablation": order[::-1]},
        score=score,
        tolerance=0.15,
        step=0.1,
        bootstrap=bootstrap,
    )
    indices = resample_indices(60, 200, seed=5)
    threshold = score.threshold
    by_order = {}
    for label, first_at in (("importance", 5), ("ablation", 9)):  # head (0, 0) is masked from step first_at + 1
        shares = []
        for row in indices:  # every step's accuracy on the resampled examples, then the one-curve rule
            t = threshold[row]
            scores = [float(np.mean((t >= m) & ~((m > first_at) & (t % 10 == 1)))) for m in range(11)]
            shares.append(
                prunable_share(pd.DataFrame({"pruned": range(11), "share": np.arange(11) / 10, "score": scores}), 0.15)
            )
        by_order[label] = np.array(shares)
    expected = Spread.of(by_order["importance"])
    assert got["importance"]["share_se"] == pytest.approx(expected.se) and expected.se > 0
    assert (got["importance"]["share_low"], got["importance"]["share_high"]) == (expected.low, expected.high)
    assert got["ablation"]["share_se"] == pytest.approx(Spread.of(by_order["ablation"]).se)
    # paired: the difference's spread is that of the per-resample differences, not of the two apart
    paired = Spread.of(by_order["importance"] - by_order["ablation"]).se
    assert got["importance"]["minus_ablation_se"] == pytest.approx(paired) and paired > 0
    assert paired != pytest.approx(np.hypot(expected.se, Spread.of(by_order["ablation"]).se), rel=0.01)


def test_orders_and_curves_carry_the_spread_and_summarise_keeps_it_only_at_its_tolerance():
    from helpers.heads.gates import spec_of

    rows = []
    for order in ("importance", "ablation", "random 0"):
        rows.append(
            pd.DataFrame(
                {
                    "order": order,
                    "pruned": range(3),
                    "share": [0, 0.5, 1],
                    "score": [10, 9.5, 8],
                    "model": "m",
                    "track": "translation",
                    "training_seed": 0,
                }
            )
        )
    curves = pd.concat(rows, ignore_index=True)
    curves["share_se"] = curves["order"].map({"importance": 0.1, "ablation": 0.2})
    for column in ("share_low", "share_high", "share_resamples", "minus_ablation_se"):
        curves[column] = curves["order"].map({"importance": 0.5})
    curves["spread_tolerance"] = curves["order"].map({"importance": 1.0, "ablation": 1.0})
    summary = pruning.summarise(curves, pruning.TOLERANCE).set_index("order")
    assert summary.loc["importance", "share_se"] == 0.1 and summary.loc["ablation", "share_se"] == 0.2
    assert pd.isna(summary.loc["random (mean)", "share_se"])
    other = pruning.summarise(curves, {"translation": 2.0}).set_index("order")
    assert "share_se" not in other or other["share_se"].isna().all()  # resampled for another tolerance
    assert spec_of(_order(2)) == {"self": {0: [0, 1]}}


def test_the_scorers_statistics_sum_to_their_scores_and_share_one_pass(smoke):
    from helpers.book import course
    from helpers.zoo.scorers import classifier_scorers, translation_likelihood_scorer, translation_scorer

    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["valid"]
    specs = [{}, {"enc_self": {0: [0]}, "enc_dec": {1: [1]}}]
    for score in (translation_scorer(pairs, beam=2), translation_likelihood_scorer(pairs)):
        values = score.many(model, specs)
        stats = score.stats(model, specs)
        assert [score.from_stats(s.sum(0)) for s in stats] == pytest.approx(values, abs=1e-9)
        assert len(stats[0]) == len(pairs) and values[0] == pytest.approx(score(model), abs=1e-9)
    classifier, tokenizer = course.load_classifier(smoke, "paraphrase")
    examples = course.load_data(smoke, "paraphrase")["valid"]
    scorers = classifier_scorers(tokenizer, examples, metrics=["f1", "accuracy", "log_likelihood"], max_length=80)
    specs = [{}, {"self": {0: [0, 1]}}]
    for score in scorers.values():
        assert [score.from_stats(s.sum(0)) for s in score.stats(classifier, specs)] == pytest.approx(
            score.many(classifier, specs), abs=1e-9
        )


def test_a_translation_scorer_decodes_a_spec_once_for_scores_and_statistics(smoke, monkeypatch):
    from helpers.book import course
    from helpers.zoo import scorers

    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["valid"]
    decoded = []
    real = scorers.masked_translations
    monkeypatch.setattr(
        scorers,
        "masked_translations",
        lambda m, sources, *a, configs, **k: (decoded.extend(configs), real(m, sources, *a, configs=configs, **k))[1],
    )
    score = scorers.translation_scorer(pairs, beam=1)
    specs = [{}, {"enc_self": {0: [0]}}]
    score.many(model, specs)
    score.stats(model, specs[::-1])
    assert decoded == specs


def test_step_errors_and_the_kinds_errors_at_80_percent_are_spreads_of_each_resample():
    from helpers.book.chapters.ch08_attention_kinds import MARGIN_ERRORS, at_80_errors
    from helpers.sweeps.curve_spread import step_errors

    rng = np.random.default_rng(4)
    shares = np.linspace(0, 1, 6)  # 0.8 is step 4
    resampled = {k: (shares, 10 + rng.normal(0, 1, (40, 6)).cumsum(1)) for k in ("enc_self", "enc_dec", "dec_self")}
    errors = at_80_errors(resampled)
    left = {k: c[:, 4] / c[:, 0] for k, (_, c) in resampled.items()}
    ratio = {k: np.exp(c[:, 0] - c[:, 4]) for k, (_, c) in resampled.items()}
    assert errors["relative_80%_se"]["enc_dec"] == pytest.approx(np.std(left["enc_dec"], ddof=1))
    assert errors["perplexity_ratio_80%_se"]["dec_self"] == pytest.approx(np.std(ratio["dec_self"], ddof=1))
    margin = left["enc_dec"] - np.minimum(left["enc_self"], left["dec_self"])  # per resample, against the lower one
    assert errors[MARGIN_ERRORS[0]] == pytest.approx(np.std(margin, ddof=1))
    assert errors[MARGIN_ERRORS[1]] == pytest.approx(
        np.std(ratio["enc_dec"] - np.maximum(ratio["enc_self"], ratio["dec_self"]), ddof=1)
    )
    values = resampled["enc_dec"][1]
    assert step_errors(values).tolist() == pytest.approx([np.std(values[:, i], ddof=1) for i in range(6)])
    values[3, 2] = np.nan
    assert np.isnan(step_errors(values)[2]) and not np.isnan(step_errors(values)[1])


def test_more_tasks_summaries_keep_each_curves_share_error():
    from helpers.book.chapters import ch10_appendix_more_tasks as more_tasks

    curve = pd.DataFrame(
        {
            "pruned": range(3),
            "share": [0, 0.5, 1],
            "score": [0.9, 0.895, 0.5],
            "model": "sentiment",
            "task": "sentiment",
            "metric": "accuracy",
            "training_seed": 0,
            "step": 0.5,
        }
    )
    spread = {"share_se": 0.2, "share_low": 0.0, "share_high": 0.5, "share_resamples": 10, "spread_tolerance": 0.01}
    summary = more_tasks.summarise(curve.assign(**spread))
    assert summary["share_se"].iloc[0] == 0.2 and summary["prunable_share"].iloc[0] == 0.5
    assert "minus_ablation_se" not in summary  # an importance order alone has no ablation to compare


def test_the_band_top_row_carries_the_percentiles_error_over_the_orders():
    rows = [
        pd.DataFrame(
            {
                "order": order,
                "pruned": range(3),
                "share": [0, 0.5, 1],
                "score": scores,
                "model": "m",
                "track": "translation",
                "training_seed": 0,
            }
        )
        for order, scores in (
            ("importance", [10, 9.5, 0]),
            ("random 0", [10, 9.2, 0]),
            ("random 1", [10, 7, 0]),
            ("random 2", [10, 9.9, 9.5]),
        )
    ]
    summary = pruning.summarise(pd.concat(rows, ignore_index=True), pruning.TOLERANCE).set_index("order")
    assert summary.loc["random (95%)", "band_se"] == pytest.approx(
        pruning.quantile_error(np.array([0.5, 0.0, 1.0]), 0.95)
    )
    assert pd.isna(summary.loc["random (mean)", "band_se"]) and pd.isna(summary.loc["importance", "band_se"])
