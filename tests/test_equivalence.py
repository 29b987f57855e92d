"""Unimportant or unmeasured: a head whose effect is known on a tiny model is classed as the truth
says on each side of the margin (``experiments.equivalence``, ``heads.significance``)."""

import random
from types import SimpleNamespace

import pytest
import torch
from test_scorers import _WordIds

from helpers.book.experiments import equivalence
from helpers.book.experiments.head_effects import classifier_effects
from helpers.heads.significance import Bootstrap


def _tiny_bert(examples: int = 600):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        num_labels=3,
        initializer_range=0.5,
    )
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
        data,
        configs,
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


def test_examples_to_decide_scale_the_unplaced_rows_half_width_down_to_their_room():
    import pandas as pd

    from helpers.heads.significance import equivalence_class

    # change -0.3 BLEU with half-width 1.0 on 200 pairs, margin 1: placed within ±1 once the
    # half-width is below 0.7 (room to the margin), i.e. on 200 (1 / 0.7)^2 = 408.2 pairs
    rows = pd.DataFrame(
        [
            {"delta": -0.3, "delta_low": -1.3, "delta_high": 0.7, "significant": False, "examples": 200},
            {"delta": 0.0, "delta_low": -0.5, "delta_high": 0.5, "significant": False, "examples": 200},  # placed
            {"delta": -0.8, "delta_low": -1.6, "delta_high": 0.0, "significant": False, "examples": 100},
        ]
    )
    # the third: room max(0.8, 0.2) = 0.8 for its half-width 0.8 on 100: 100 pairs; the first needs more
    assert equivalence.examples_to_decide(rows, 1.0) == 409
    assert equivalence.examples_to_decide(rows.iloc[[1]], 1.0) == 0
    # the same interval, its half-width shrunk as 1 / sqrt(n) to the examples found, is placed
    for _, r in rows.iterrows():
        n = equivalence.examples_to_decide(pd.DataFrame([r]), 1.0)
        if n:
            half = (r["delta_high"] - r["delta_low"]) / 2 * (r["examples"] / n) ** 0.5
            low, high = r["delta"] - half, r["delta"] + half
            assert equivalence_class(low, high, 1.0) != "undetermined" or high <= 0, (r.to_dict(), n)
    # a significant row with an undetermined interval is placed by its test: nothing to decide
    significant = rows.iloc[[2]].assign(significant=True)
    assert equivalence.examples_to_decide(significant, 1.0) == 0
