"""Unimportant or unmeasured: a head whose effect is known on a tiny model is classed as the truth
says on each side of the margin (``experiments.equivalence``, ``heads.significance``)."""

import random
from types import SimpleNamespace

import pytest
import torch
from test_scorers import _WordIds
from tiny_models import TINY_BERT, seeded_config

from helpers.book.experiments import equivalence
from helpers.book.experiments.head_effects import classifier_effects
from helpers.heads.significance import Bootstrap


def _tiny_bert(examples: int = 600):
    from transformers import BertConfig, BertForSequenceClassification

    config = seeded_config(BertConfig, TINY_BERT, num_hidden_layers=2, initializer_range=0.5)
    model = BertForSequenceClassification(config).eval()
    rng = random.Random(0)
    words = "the a cat dog sees runs blue red big small over under".split()
    data = [
        SimpleNamespace(
            text=" ".join(rng.choices(words, k=rng.randint(3, 12))), text_pair=None, label=rng.randrange(3)
        )
        for _ in range(examples)
    ]
    out = model.bert.encoder.layer[0].attention.output.dense.weight  # [hidden, heads * head_dim]
    with torch.no_grad():
        out[:, 0:6] = 0.0  # head 0 of layer 0 writes nothing: masking it changes no output at all
        out[:, 6:12] *= 40.0  # head 1 writes forty times louder: masking it changes the outputs a lot
    return model, data


def test_a_head_of_known_effect_is_classed_on_each_side_of_the_margin():
    model, data = _tiny_bert()
    configs = [("self", 0, (0,)), ("self", 0, (1,))]
    rows = classifier_effects(
        model,
        _WordIds(),
        examples=data,
        configs=configs,
        max_length=16,
        bootstrap=Bootstrap(n_resamples=400, alpha=0.05),
        progress=False,
        measure="likelihood",
    ).set_index("head")
    silent, loud = rows.loc[0], rows.loc[1]
    assert (silent["delta"], silent["delta_low"], silent["delta_high"]) == (0.0, 0.0, 0.0)
    effect = abs(loud["delta"])
    assert effect > 0.05 and loud["delta_low"] <= loud["delta"] <= loud["delta_high"]
    sign = "harmful" if loud["delta"] < 0 else "helpful"
    near, far = sorted([abs(loud["delta_low"]), abs(loud["delta_high"])])
    assert loud["delta_low"] * loud["delta_high"] > 0  # the interval excludes 0: the effect is seen
    below, above = near / 2, 2 * far  # a margin under the whole interval, and one over it
    assert equivalence.classes(rows.loc[[1]], below).iloc[0] == sign
    assert equivalence.classes(rows.loc[[1]], above).iloc[0] == "negligible"
    assert (
        equivalence.classes(rows.loc[[1]], (near + far) / 2).iloc[0] == "undetermined"
    )  # a margin inside the interval
    for margin in (below, above, 1e-9):
        assert equivalence.classes(rows.loc[[0]], margin).iloc[0] == "negligible"
    counts = equivalence.class_counts(rows, below)
    assert sum(counts.values()) == len(rows) == 2


def test_a_margin_is_positive_and_named():
    assert equivalence.margin("translation", "metric", {}) == 1.0
    assert equivalence.margin("classifier", "metric", {"accuracy": 0.02}) == 0.02
    assert equivalence.margin("classifier", "likelihood", {}) == pytest.approx(0.00995033)
    with pytest.raises(ValueError, match="unknown margin"):
        equivalence.margin("translation", "metric", {"BLUE": 1.0})


def test_examples_to_decide_place_an_unplaced_row_at_the_stated_power():
    import numpy as np
    import pandas as pd

    from helpers.heads.significance import equivalence_class

    # a change of -0.3 (margin 1) measured with a normal interval at alpha = 0.01 (its 1% and
    # 99% quantiles) on 200 examples of spread 6: unplaced; on the examples found, 80% of fresh
    # samples place it within ±1 (the larger room), more counting those that turn out significant
    alpha, spread, d, n = 0.01, 6.0, -0.3, 200
    z = 2.3263478740408408  # z(0.99)
    half = z * spread / n**0.5
    row = {"delta": d, "delta_low": d - half, "delta_high": d + half, "significant": False, "examples": n}
    assert equivalence_class(row["delta_low"], row["delta_high"], 1.0) == "undetermined"
    need = equivalence.examples_to_decide(pd.DataFrame([row]), 1.0, alpha)
    rng = np.random.default_rng(0)
    means = rng.normal(d, spread / need**0.5, size=4000)
    width = z * spread / need**0.5
    placed = [
        equivalence_class(m - width, m + width, 1.0) != "undetermined" or m + width < 0 or m - width > 0 for m in means
    ]
    # at least the power (one way alone gives 80%: the other, significance, adds to it)
    assert np.mean(placed) >= 0.78, (need, np.mean(placed))
    within = [abs(m) + width < 1.0 for m in means]
    assert 0.76 <= np.mean(within) <= 0.84, np.mean(within)
    # at 50% power the old projection: the half-width shrunk to the room, n (w / r)^2
    assert equivalence.examples_to_decide(pd.DataFrame([row]), 1.0, alpha, power=0.5) == int(
        np.ceil(n * (half / 0.7) ** 2)
    )
    # a row of two looks was tested at alpha / 2: its z is larger, so it needs fewer more
    looked = pd.DataFrame([{**row, "look": 2}])
    assert equivalence.examples_to_decide(looked, 1.0, alpha) < need
    # placed rows, and significant ones, need nothing
    placed_row = {**row, "delta_low": -0.5, "delta_high": 0.4}
    assert equivalence.examples_to_decide(pd.DataFrame([placed_row]), 1.0, alpha) == 0
    assert equivalence.examples_to_decide(pd.DataFrame([{**row, "significant": True}]), 1.0, alpha) == 0
