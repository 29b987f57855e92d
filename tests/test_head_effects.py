"""Head-effect tables: the sweep cache returns what a fresh sweep computes, resumes an interrupted
sweep, and §3.3's per-layer selection picks the right head on hand-made data."""

import warnings

import pandas as pd
import pytest

from helpers.book import course
from helpers.book.experiments import head_effects
from helpers.book.experiments.head_effects import (
    best_per_layer,
    classifier_effects,
    configs_of,
    held_out,
    kept_head,
    layer_table,
    significance_counts,
    translation_effects,
)
from helpers.book.store.sweep_cache import code_digest
from helpers.heads.significance import Bootstrap
from helpers.sweeps import ablation
from helpers.sweeps.ablation import all_but_one_configs, one_head_configs


def _no_sweep(*args, **kwargs):
    raise AssertionError("the cache should have answered")


def test_classifier_cache_gives_the_uncached_table_and_computes_only_new_configs(smoke, tmp_path, monkeypatch):
    model, tokenizer = course.load_classifier(smoke, "nli")
    examples = course.load_data(smoke, "nli")["matched"][:20]
    configs = one_head_configs(model)
    args = dict(
        max_length=48, bootstrap=Bootstrap(n_resamples=50, min_units=2), progress=False
    )  # tiny sets: code paths
    fresh = classifier_effects(model, tokenizer, examples=examples, configs=configs, **args)
    first = classifier_effects(model, tokenizer, examples=examples, configs=configs[:3], cache_dir=tmp_path, **args)
    swept = []
    real = head_effects.single_layer_sweep
    monkeypatch.setattr(
        head_effects,
        "single_layer_sweep",
        lambda m, d, *, configs, **kw: swept.append(list(configs)) or real(m, d, configs=configs, **kw),
    )
    cached = classifier_effects(model, tokenizer, examples=examples, configs=configs, cache_dir=tmp_path, **args)
    assert swept == [configs[3:]]  # the first three came from the cache
    pd.testing.assert_frame_equal(cached, fresh)
    pd.testing.assert_frame_equal(first, fresh.iloc[:3])
    monkeypatch.setattr(head_effects, "single_layer_sweep", _no_sweep)
    pd.testing.assert_frame_equal(
        classifier_effects(model, tokenizer, examples=examples, configs=configs, cache_dir=tmp_path, **args), fresh
    )
    # the split-half scores are the metric on the even- and odd-numbered examples
    import json

    from helpers.heads import metrics

    folder = next(p for p in tmp_path.iterdir() if (p / "self-L0-mask0.json").exists())
    log_probs, gold = json.loads((folder / "self-L0-mask0.json").read_text()), [e.label for e in examples]
    predicted = [
        max(range(len(lp)), key=lp.__getitem__) for lp in log_probs
    ]  # the sweep keeps label log-probabilities
    assert fresh["score_even"][0] == metrics.accuracy(predicted[0::2], gold[0::2])
    assert fresh["score_odd"][0] == metrics.accuracy(predicted[1::2], gold[1::2])
    # other examples or settings are another sweep, not a stale answer
    monkeypatch.setattr(head_effects, "single_layer_sweep", real)
    other = classifier_effects(
        model, tokenizer, examples=examples[:10], configs=configs[:2], cache_dir=tmp_path, **args
    )
    assert len({p.name for p in tmp_path.iterdir()}) == 2 and len(other) == 2


def test_classifier_sweeps_batched_by_length_keep_each_example_in_its_place(smoke, tmp_path):
    """The sweep batches examples from the shortest to the longest, yet each stored prediction is
    that of its own example: the same as the masked model predicting examples one at a time."""
    import json

    import helpers
    from helpers.zoo.classifier_training import predict

    model, tokenizer = course.load_classifier(smoke, "nli")
    examples = course.load_data(smoke, "nli")["matched"][:24]
    config = one_head_configs(model)[1]
    classifier_effects(
        model,
        tokenizer,
        examples=examples,
        configs=[config],
        max_length=48,
        batch_size=8,
        bootstrap=Bootstrap(n_resamples=10, min_units=2),
        progress=False,
        cache_dir=tmp_path,
    )
    (folder,) = tmp_path.iterdir()
    kind, layer, heads = config
    stored = json.loads((folder / f"{kind}-L{layer}-mask{heads[0]}.json").read_text())  # label log-probabilities
    with helpers.HeadGates(model) as gates:
        gates.mask({kind: {layer: list(heads)}})
        alone = [int(predict(model, tokenizer, examples=[e], batch_size=1, max_length=48)[0]) for e in examples]
        batched = predict(model, tokenizer, examples=examples, batch_size=8, max_length=48).tolist()
    assert [max(range(len(lp)), key=lp.__getitem__) for lp in stored] == alone == batched
    lengths = [len(tokenizer(e.premise, e.hypothesis)["input_ids"]) for e in examples]
    assert lengths != sorted(lengths)  # the examples are not already in length order


def test_an_interrupted_translation_sweep_resumes_with_the_same_hypotheses(smoke, tmp_path, monkeypatch):
    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["test13"][:8]
    configs = one_head_configs(model)
    fresh = translation_effects(
        model, pairs, configs=configs, beam=2, bootstrap=Bootstrap(n_resamples=50, min_units=2), progress=False
    )

    import helpers.zoo.translation_model as tm

    real, calls = tm.translate_copies, []

    def dies_on_the_third_search(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(tm, "translate_copies", dies_on_the_third_search)
    monkeypatch.setenv("SIXTEEN_HEADS_SWEEP_PROCESSES", "1")  # counts the searches of this process
    with pytest.raises(KeyboardInterrupt):
        translation_effects(
            model,
            pairs,
            configs=configs,
            beam=2,
            bootstrap=Bootstrap(n_resamples=50, min_units=2),
            progress=False,
            cache_dir=tmp_path,
            configs_per_pass=2,
        )
    (folder,) = tmp_path.iterdir()
    assert len(list(folder.glob("*.json"))) == 4  # two searches of two: unmasked + three configurations
    monkeypatch.setattr(tm, "translate_copies", real)
    resumed = translation_effects(
        model,
        pairs,
        configs=configs,
        beam=2,
        bootstrap=Bootstrap(n_resamples=50, min_units=2),
        progress=False,
        cache_dir=tmp_path,
    )
    pd.testing.assert_frame_equal(resumed, fresh)
    assert folder.name.startswith(code_digest() + "-")


def test_stale_sweeps_are_pruned_with_the_models(smoke):
    folder = course.sweeps_dir(smoke, "nli")
    (folder / "0000dead-0123456789ab").mkdir(parents=True)
    (folder / f"{code_digest()}-0123456789ab").mkdir()
    assert course.stale_folders([smoke]) == [folder / "0000dead-0123456789ab"]


def test_significance_counts_stay_inside_one_model_when_models_are_concatenated():
    # Two models' one-head effects with the same row labels 0, 1, 2 (as each sweep returns them).
    # The first chapter-03 count looked significance up by row label in the concatenated frame,
    # so the classifier's "0 significant, 1 improves" borrowed the translation model's stars.
    clf = pd.DataFrame(
        {"kind": "self", "layer": [0, 0, 1], "delta": [0.02, 0.01, -0.03], "significant": [False, False, False]}
    )
    mt = pd.DataFrame(
        {"kind": "enc_self", "layer": [0, 1, 2], "delta": [-0.4, 0.7, 0.5], "significant": [True, False, True]}
    )
    counts = pd.concat(
        [significance_counts(clf).assign(model="nli"), significance_counts(mt).assign(model="mt")], ignore_index=True
    ).set_index("model")
    assert counts.loc["nli", ["heads", "significant", "significant_up"]].tolist() == [3, 0, 0]
    assert counts.loc["mt", ["heads", "significant", "significant_up"]].tolist() == [3, 2, 1]
    assert counts.loc["nli", "largest_gain"] == 0.02 and counts.loc["mt", "largest_drop"] == -0.4
    assert counts.loc["nli", "layers"] == 2 and counts.loc["mt", "layers"] == 3
    # kinds of one model are counted apart, in the order they appear
    both = pd.concat([mt, mt.assign(kind="enc_dec", significant=False)], ignore_index=True)
    assert significance_counts(both)[["kind", "significant"]].values.tolist() == [["enc_self", 2], ["enc_dec", 0]]


def _abo(rows):
    """All-but-one effects of one 3-head layer: (kind, layer, kept head, delta, significant)."""
    return pd.DataFrame(
        [
            {"kind": k, "layer": layer, "heads": [h for h in range(3) if h != kept], "delta": d, "significant": s}
            for k, layer, kept, d, s in rows
        ]
    )


def test_best_per_layer_keeps_the_highest_delta_and_breaks_ties_by_head():
    effects = _abo(
        [
            ("enc_self", 0, 0, -2.0, True),
            ("enc_self", 0, 1, -0.5, False),
            ("enc_self", 0, 2, -1.0, True),
            ("enc_dec", 1, 0, 0.3, False),
            ("enc_dec", 1, 1, 0.3, False),
            ("enc_dec", 1, 2, 0.1, False),
        ]
    )
    best = best_per_layer(effects)
    assert list(zip(best["kind"], best["layer"], best["kept"], best["delta"])) == [
        ("enc_self", 0, 1, -0.5),
        ("enc_dec", 1, 0, 0.3),
    ]  # the paper's order of kinds
    assert configs_of(best) == [("enc_self", 0, (0, 2)), ("enc_dec", 1, (1, 2))]
    assert layer_table(best).loc[1, "enc_self"] == "-0.50"
    assert list(layer_table(best).columns) == ["enc_self", "enc_dec"]


def test_best_per_layer_compares_heads_of_different_looks_on_the_first_looks_examples():
    """Two looks leave some heads' changes on half the examples, noisier than the rest: ranked on
    their own rows, those win a layer more often than their share even when every head's true
    change is the same; ranked on the first look's changes, which every head has, they win as
    often as the others. Simulated: 2,000 layers of 8 heads, 4 stopped at the first look."""
    import numpy as np

    rng = np.random.default_rng(0)
    layers, heads = 2000, 8
    first = [h < heads // 2 for h in range(heads)]
    rows = []
    for layer in range(layers):
        for head in range(heads):
            half_a, half_b = rng.normal(0, 1, 2)  # each half of the examples' estimate of a true change 0
            early = first[head]
            rows.append(
                {
                    "kind": "self",
                    "layer": layer,
                    "heads": tuple(h for h in range(heads) if h != head),
                    "delta": half_a if early else (half_a + half_b) / 2,
                    "first_look_delta": half_a,
                    "look": 1 if early else 2,
                    "significant": False,
                }
            )
    effects = pd.DataFrame(rows)
    picked_early = (best_per_layer(effects)["look"] == 1).mean()
    assert abs(picked_early - 0.5) < 0.03
    own_rows = (best_per_layer(effects.drop(columns="first_look_delta"))["look"] == 1).mean()
    assert own_rows > 0.6  # the bias the comparison removes (0.64 expected)
    # a layer whose heads all took the same look keeps ranking on its own rows
    same = effects[effects["look"] == 2].assign(first_look_delta=0.0)
    assert best_per_layer(same)["delta"].tolist() == same.groupby("layer")["delta"].max().tolist()


def test_held_out_reports_the_head_chosen_on_the_other_set():
    selection = _abo([("self", 0, 0, -0.1, False), ("self", 0, 1, -0.9, True), ("self", 0, 2, -0.3, False)])
    report = _abo([("self", 0, 0, -1.5, True), ("self", 0, 1, 0.0, False), ("self", 0, 2, 0.2, False)])
    chosen = held_out(best_per_layer(selection), report)
    assert chosen[["kept", "delta", "significant"]].values.tolist() == [[0, -1.5, True]]
    # and it is not simply the best head of the report set
    assert best_per_layer(report)["kept"].tolist() == [2]
    with pytest.raises(ValueError, match="evaluate configs_of"):
        held_out(best_per_layer(selection), report.iloc[1:])


def test_kept_head_and_all_but_one_configs_agree(smoke):
    model, _ = course.load_classifier(smoke, "nli")
    configs = all_but_one_configs(model)
    heads = ablation.attention_sites(model)[0].num_heads
    assert [kept_head(h) for _, layer, h in configs if layer == 0] == list(range(heads))


def test_the_papers_tables_lay_out_like_ours():
    from helpers.book.experiments.head_effects import grid
    from helpers.book.paper import values as paper_values

    table1 = grid(paper_values.effects(1), "enc_self")
    assert table1.shape == (6, 16) and table1.loc["layer 1", 6] == "-0.53*"
    assert table1.map(lambda c: c.endswith("*")).sum().sum() == paper_values.SIGNIFICANT_ENC_SELF
    table5 = layer_table(paper_values.effects(5))
    assert list(table5.columns) == list(paper_values.KINDS) and table5.loc[6, "enc_dec"] == "-18.89*"
    assert table5.map(lambda c: c.endswith("*")).sum().sum() == 9  # "50% of layers" (App. A)
    table3 = layer_table(paper_values.effects(3), scale=100)
    assert table3.loc[9, "self"] == "-0.96" and len(table3) == 12


def test_cross_domain_pairs_configurations_and_correlates_like_numpy():
    import numpy as np

    from helpers.book.experiments.head_effects import correlation, paired_scores

    def one_head(scores):
        return pd.DataFrame(
            [
                {"kind": "self", "layer": i // 2, "heads": [i % 2], "head": i % 2, "score": s, "delta": s - 1.0}
                for i, s in enumerate(scores)
            ]
        )

    a, b = one_head([0.9, 0.8, 1.0, 0.7]), one_head([0.5, 0.6, 0.9, 0.2])
    paired = paired_scores(a, b.iloc[::-1])  # order does not matter, configurations do
    assert paired["score_out"].tolist() == [0.5, 0.6, 0.9, 0.2]
    r, p = correlation(paired)
    assert r == pytest.approx(np.corrcoef([0.9, 0.8, 1.0, 0.7], [0.5, 0.6, 0.9, 0.2])[0, 1])
    assert 0 < p < 1
    assert "score_even_in" not in paired  # hand-made effects without split halves pair as they are
    halves = lambda df: df.assign(score_even=df["score"] + 0.1, score_odd=df["score"] - 0.1)
    both = paired_scores(halves(a), halves(b))
    assert both["score_even_out"].tolist() == pytest.approx([0.6, 0.7, 1.0, 0.3])
    assert both["score_odd_in"].tolist() == pytest.approx([0.8, 0.7, 0.9, 0.6])
    flat = paired_scores(a, one_head([0.5] * 4))
    assert np.isnan(correlation(flat)[0])
    with pytest.raises(ValueError, match="same configurations"):
        paired_scores(a, b.iloc[:3])


def test_subsets_are_random_fixed_and_in_order():
    items = list(range(100))
    a = course.subset(items, 10)
    assert a == course.subset(items, 10) == sorted(a) and len(set(a)) == 10
    assert a != items[:10]
    assert course.subset(items, 0) == items == course.subset(items, 500)


def test_a_damaged_cache_entry_is_named_set_aside_and_computed_again(smoke, tmp_path):
    from helpers.book.store.sweep_cache import DamagedEntryWarning

    model, tokenizer = course.load_classifier(smoke, "nli")
    examples = course.load_data(smoke, "nli")["matched"][:12]
    configs = one_head_configs(model)[:4]
    args = dict(max_length=48, bootstrap=Bootstrap(n_resamples=50, min_units=2), progress=False, cache_dir=tmp_path)
    first = classifier_effects(model, tokenizer, examples=examples, configs=configs, **args)
    (folder,) = tmp_path.iterdir()
    damaged = folder / "self-L0-mask1.json"
    damaged.write_text(damaged.read_text()[:40])  # cut short, as by a full disk
    short = folder / "self-L0-mask2.json"
    short.write_text("[[0.0, 0.0, 0.0]]")  # valid JSON, but one example where there are 12
    with pytest.warns(DamagedEntryWarning) as caught:
        again = classifier_effects(model, tokenizer, examples=examples, configs=configs, **args)
    pd.testing.assert_frame_equal(again, first)
    said = " ".join(str(w.message) for w in caught)
    assert str(damaged) in said and str(short) in said and "computed again" in said
    assert (folder / "self-L0-mask1.json.damaged").exists() and (folder / "self-L0-mask2.json.damaged").exists()
    assert damaged.exists() and short.exists()  # recomputed and stored again
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedEntryWarning)
        pd.testing.assert_frame_equal(
            classifier_effects(model, tokenizer, examples=examples, configs=configs, **args), first
        )


def test_bleu_at_positions_is_the_bleu_of_those_pairs_read_from_the_search_over_all(smoke, tmp_path):
    # the held-out ablation order reads chapter 03's BLEU sweep at the positions of one half
    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["test13"][:8]
    configs = one_head_configs(model)[:3]
    at = [1, 2, 5, 7]
    read = translation_effects(
        model,
        pairs,
        configs=configs,
        beam=2,
        bootstrap=Bootstrap(n_resamples=50, min_units=2),
        progress=False,
        cache_dir=tmp_path,
        positions=at,
    )
    alone = translation_effects(
        model,
        [pairs[i] for i in at],
        configs=configs,
        beam=2,
        bootstrap=Bootstrap(n_resamples=50, min_units=2),
        progress=False,
    )
    pd.testing.assert_frame_equal(read, alone)
    assert (read["examples"] == 4).all()


def test_bleu_in_two_looks_is_each_looks_own_sweep_and_goes_on_only_where_undecided(smoke, tmp_path):
    # chapter 04 reports its chosen heads in two looks over the whole split: look 1 on a random
    # half at alpha/2, look 2 on every pair at alpha/2 for the heads look 1 left undetermined
    from helpers.book.experiments.head_effects import Looks
    from helpers.sweeps.sequential import look_split, settled

    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["test13"][:12]
    configs = one_head_configs(model)[:4]
    bootstrap = Bootstrap(n_resamples=50, min_units=2, alpha=0.1)
    looks = Looks({"BLEU": 0.5}, first_share=0.5)
    rows = translation_effects(
        model, pairs, configs=configs, beam=2, bootstrap=bootstrap, progress=False, cache_dir=tmp_path, looks=looks
    )
    first, _ = look_split(len(pairs), 0.5, bootstrap.seed)
    half = bootstrap.at(bootstrap.alpha / 2)
    early = translation_effects(
        model, [pairs[i] for i in first], configs=configs, beam=2, bootstrap=half, progress=False
    )
    went_on = [c for c, lo, hi in zip(configs, early["delta_low"], early["delta_high"]) if not settled(lo, hi, 0.5)]
    assert configs_of(rows[rows["look"] == 2]) == went_on
    stopped = rows[rows["look"] == 1].reset_index(drop=True)
    want = early[[c not in went_on for c in configs]].reset_index(drop=True)
    for column in ("delta", "delta_low", "delta_high", "p_value"):
        assert stopped[column].tolist() == pytest.approx(want[column].tolist()), column
    assert (stopped["examples"] == len(first)).all()
    if went_on:  # the rest: every pair, at alpha/2
        late = translation_effects(model, pairs, configs=went_on, beam=2, bootstrap=half, progress=False)
        looked = rows[rows["look"] == 2].reset_index(drop=True)
        for column in ("delta", "delta_low", "delta_high", "p_value"):
            assert looked[column].tolist() == pytest.approx(late[column].tolist()), column
        assert (looked["examples"] == len(pairs)).all()


def test_a_bleu_sweep_in_looks_refuses_positions(smoke):
    from helpers.book.experiments.head_effects import Looks

    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["test13"][:4]
    with pytest.raises(ValueError, match="either looks or positions"):
        translation_effects(model, pairs, configs=[], looks=Looks({"BLEU": 1.0}), positions=[0, 1])


def test_a_bleu_first_look_at_given_positions_is_the_sweep_of_those_pairs(smoke, tmp_path):
    # chapter 04's first look is the decoded subset its heads were chosen on (read from the cache)
    from helpers.book.experiments.head_effects import Looks

    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["test13"][:12]
    configs = one_head_configs(model)[:3]
    bootstrap = Bootstrap(n_resamples=50, min_units=2, alpha=0.1)
    first = course.subset_positions(len(pairs), 6)
    assert [pairs[i] for i in first] == course.subset(pairs, 6)
    rows = translation_effects(
        model,
        pairs,
        configs=configs,
        beam=2,
        bootstrap=bootstrap,
        progress=False,
        looks=Looks({"BLEU": 0.5}),
        first_look=first,
    )
    alone = translation_effects(
        model, course.subset(pairs, 6), configs=configs, beam=2, bootstrap=bootstrap.at(0.05), progress=False
    )
    early = rows[rows["look"] == 1]
    assert (early["examples"] == 6).all()
    mine = alone[[c in configs_of(early) for c in configs_of(alone)]]
    assert early["delta"].tolist() == pytest.approx(mine["delta"].tolist())
    assert early["delta_low"].tolist() == pytest.approx(mine["delta_low"].tolist())


def test_heads_chosen_on_the_first_looks_pairs_stop_there_only_when_harmful(smoke):
    # review: the same-set protocol's first look is the subset its heads were chosen
    # on, which lifts their scores; a "negligible" there would carry that selection, so only a
    # harmful layer stops at it
    from helpers.book.experiments.head_effects import Looks

    model = course.load_translation(smoke)
    pairs = course.load_data(smoke, "translation")["test13"][:12]
    configs = one_head_configs(model)[:3]
    bootstrap = Bootstrap(n_resamples=50, min_units=2, alpha=0.1)
    wide = Looks({"BLEU": 50.0})  # a margin every interval lies within: negligible at the first look
    first = course.subset_positions(len(pairs), 6)
    args = dict(beam=2, bootstrap=bootstrap, progress=False, looks=wide, first_look=first)
    plain = translation_effects(model, pairs, configs=configs, **args)
    chosen = translation_effects(model, pairs, configs=configs, chosen_here=True, **args)
    assert (plain["look"] == 1).all()
    assert (chosen["look"] == 2).all() and (chosen["examples"] == len(pairs)).all()
