"""The scores against scikit-learn and hand-worked cases."""

import random

import pytest
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from helpers.heads import metrics


@pytest.mark.parametrize("seed", range(5))
def test_classification_scores_match_scikit_learn(seed):
    rng = random.Random(seed)
    gold = [rng.randint(0, 1) for _ in range(200)]
    pred = [g if rng.random() < 0.7 else 1 - g for g in gold]
    assert metrics.accuracy(pred, gold) == pytest.approx(accuracy_score(gold, pred))
    assert metrics.matthews(pred, gold) == pytest.approx(matthews_corrcoef(gold, pred))
    assert metrics.f1(pred, gold) == pytest.approx(f1_score(gold, pred))


def test_degenerate_predictions():
    assert metrics.matthews([1, 1, 1], [0, 1, 0]) == 0.0
    assert metrics.f1([0, 0], [1, 0]) == 0.0
    with pytest.raises(ValueError, match="2 predictions for 3 labels"):
        metrics.accuracy([0, 1], [0, 1, 1])


def test_bleu_by_hand():
    score, signature = metrics.bleu(["le chat dort ."], ["le chat dort ."])
    assert score == pytest.approx(100.0)
    assert "tok:none" in signature
    hyps = ["le chat noir dort .", "un chien court ."]
    refs = ["le chat noir dort .", "un chien saute ."]
    # corpus n-gram matches: 1-grams 5+3 of 9, 2-grams 4+1 of 7, 3-grams 3+0 of 5, 4-grams 2+0 of 3;
    # equal lengths, so no brevity penalty
    expected = 100 * (8 / 9 * 5 / 7 * 3 / 5 * 2 / 3) ** 0.25
    assert metrics.bleu(hyps, refs)[0] == pytest.approx(expected)
