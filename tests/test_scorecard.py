"""The scorecard's verdicts follow its stated rules on hand-made result tables."""

import numpy as np
import pandas as pd
import pytest

from helpers.book.chapters.ch12_unimportant_or_unmeasured import removal_table
from helpers.book.scorecard.card import CLAIMS, disagreements, scorecard, verdict_counts
from helpers.book.verdicts.engine import (
    CANNOT_TELL,
    NOT_MEASURED,
    NOT_REPRODUCED,
    NOT_RUN,
    PARTLY,
    REPRODUCED,
)


def _write(folder, name, rows):
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / f"{name}.csv", index=False)


def _verdicts(root, profile="p"):
    card = scorecard(profile, results_root=root)
    return dict(zip(card["claim"], card["verdict"])), card


def test_by_default_the_card_reads_where_the_chapters_write(tmp_path, monkeypatch):
    from helpers.book.store.results import save_table

    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path))
    save_table(pd.DataFrame(_shares(0.4)), "p", "06_prunable_shares")
    by_default, given = scorecard("p"), scorecard("p", results_root=tmp_path)
    assert by_default.equals(given)
    assert (by_default["chapter"] == "06_pruning_curves").any()
    assert not by_default.loc[by_default["chapter"] == "06_pruning_curves", "verdict"].eq(NOT_RUN).all()


def _shares(translation, nli_importance=0.4, nli_ablation=0.1):
    # the ablation order out of sample; shares and their differences with no bootstrap spread
    # (every resample at the same step): the intervals are points, and the rules read the shares
    held_out = {"selected_on": "held-out half of the scored split", "share_se": 0.0, "minus_ablation_se": 0.0}
    return [
        {"track": "translation", "model": "mt", "order": "importance", "prunable_share": translation, **held_out},
        {"track": "translation", "model": "mt", "order": "ablation", "prunable_share": 0.1, **held_out},
        {"track": "classifier", "model": "nli", "order": "importance", "prunable_share": nli_importance, **held_out},
        {"track": "classifier", "model": "nli", "order": "ablation", "prunable_share": nli_ablation, **held_out},
    ]


def test_every_claim_is_not_run_without_results(tmp_path):
    card = scorecard("empty", results_root=tmp_path)
    assert len(card) == len(CLAIMS) and set(card["verdict"]) == {NOT_RUN}
    assert card["ours"].str.contains("not found: run").all()
    assert verdict_counts(card) == {
        REPRODUCED: 0,
        PARTLY: 0,
        CANNOT_TELL: 0,
        NOT_REPRODUCED: 0,
        NOT_RUN: len(CLAIMS),
    }


@pytest.mark.parametrize(
    "share, expected", [(0.2, REPRODUCED), (0.3, REPRODUCED), (0.05, PARTLY), (0.0, NOT_REPRODUCED)]
)
def test_prunable_share_rule(tmp_path, share, expected):
    _write(tmp_path / "p", "06_prunable_shares", _shares(share))
    verdicts, card = _verdicts(tmp_path)
    row = card[card["claim"].str.contains("translation model's heads can be pruned")].iloc[0]
    assert row["verdict"] == expected and row["ours"] == f"{share:.0%} [{share:.0%}, {share:.0%}]"
    # importance (share) against ablation (0.1) in translation, 0.4 against 0.1 in the classifier: at
    # most one 10% step behind ablation is "at least as well" within the shares' tolerance
    beats = verdicts["Ranking by importance prunes at least as well as ranking by one-head ablation"]
    assert beats == REPRODUCED


def test_speed_rules_compare_batch_sizes(tmp_path):
    from helpers.sweeps.throughput import speed_gains

    def speed(gain_small, gain_large):
        rows = [
            {
                "batch_size": b,
                "variant": v,
                "median": 100 * (1 + g if v == "pruned" else 1),
                "iqr": 1.0,
                "flops": 50 if v == "pruned" else 100,
                "device": "cpu",
            }
            for b, g in ((1, gain_small), (64, gain_large))
            for v in ("original", "pruned", "gated")
        ]
        _write(tmp_path / "p", "07_speed", rows)
        _write(tmp_path / "p", "07_speed_gains", speed_gains(pd.DataFrame(rows)).to_dict("records"))

    speed(0.01, 0.175)
    verdicts, _ = _verdicts(tmp_path)
    assert verdicts["Removing half the heads speeds inference up at large batches"] == REPRODUCED
    assert verdicts["At batch size 1 there is almost no gain"] == REPRODUCED
    speed(0.20, 0.03)
    verdicts, _ = _verdicts(tmp_path)
    assert verdicts["Removing half the heads speeds inference up at large batches"] == PARTLY  # faster, far below
    assert verdicts["At batch size 1 there is almost no gain"] == NOT_REPRODUCED


def test_one_head_rules_ignore_the_papers_rows(tmp_path):
    rows = [
        {
            "model": "nli",
            "kind": "self",
            "heads": 72,
            "significant": 8,
            "significant_up": 6,
            "largest_drop": -0.01,
            "largest_gain": 0.01,
        },
        {
            "model": "mt",
            "kind": "enc_self",
            "heads": 48,
            "significant": 20,
            "significant_up": 0,
            "largest_drop": -1.0,
            "largest_gain": 0.1,
        },
        {
            "model": "WMT",
            "from_paper": True,
            "kind": "enc_self",
            "heads": 96,
            "significant": 96,
            "significant_up": 0,
            "largest_drop": -0.5,
            "largest_gain": 0.2,
        },
    ]
    _write(tmp_path / "p", "03_one_head_counts", rows)
    verdicts, card = _verdicts(tmp_path)
    # nli 8/72 is a minority, mt 20/48 is not: partly; the paper's 96/96 row is not ours
    assert verdicts["Few heads matter alone: masking one changes the score significantly for a minority"] == PARTLY
    assert "mt 20/48" in card.loc[0, "ours"] and "96" not in card.loc[0, "ours"]


def test_a_table_from_an_older_chapter_asks_for_a_rerun(tmp_path):
    _write(tmp_path / "p", "10_appendix_summary", [{"model": "sentiment", "prunable_share": 0.5}])
    _, card = _verdicts(tmp_path)
    appendix = card[card["chapter"] == "10_appendix_more_tasks"]
    assert (appendix["verdict"] == NOT_RUN).all() and appendix["ours"].str.contains("rerun").all()


def _seeded(rows, training_seed):
    return [{**row, "training_seed": training_seed} for row in rows]


TRANSLATION_PRUNABLE = "A share of the translation model's heads can be pruned with no noticeable loss"
CLASSIFIER_PRUNABLE = "A share of the classifier's heads can be pruned with no noticeable loss"


def test_a_claim_is_judged_once_on_its_seeds_together(tmp_path):
    # seed 0: 20% (reproduced), seed 1: 5% (partly): before, "depends on the seed"; together their
    # mean, 12.5%, lies within 10 points of the paper's 20%. Each seed's value stands beside it
    _write(tmp_path / "p", "06_prunable_shares", _seeded(_shares(0.2), 0) + _seeded(_shares(0.05), 1))
    verdicts, card = _verdicts(tmp_path)
    assert verdicts[TRANSLATION_PRUNABLE] == REPRODUCED and verdicts[CLASSIFIER_PRUNABLE] == REPRODUCED
    row = card[card["claim"] == TRANSLATION_PRUNABLE].iloc[0]
    assert row["ours"].startswith("12.5% [12.5%, 12.5%]") and row["seeds"] == "0, 1"
    assert row["each seed"] == "seed 0: 20% [20%, 20%] (reproduced); seed 1: 5% [5%, 5%] (partly)"
    assert row["seeds differ"] != ""
    classifier = card[card["claim"] == CLASSIFIER_PRUNABLE].iloc[0]
    assert classifier["ours"].startswith("40% [40%, 40%]") and classifier["each seed"] == ""  # one value: said once


def test_seeds_that_agree_give_their_common_verdict_and_a_seed_missing_from_a_table_is_skipped(tmp_path):
    # the classifier has a third seed, the translation model only two: seed 2 is checked where it has rows
    rows = _seeded(_shares(0.05), 0) + _seeded(_shares(0.07), 1)
    rows += _seeded([r for r in _shares(0.0) if r["track"] == "classifier"], 2)
    _write(tmp_path / "p", "06_prunable_shares", rows)
    verdicts, card = _verdicts(tmp_path)
    assert verdicts[TRANSLATION_PRUNABLE] == PARTLY
    assert card[card["claim"] == TRANSLATION_PRUNABLE].iloc[0]["seeds"] == "0, 1"
    # seed 2 has no translation run, so no claim that reads this table uses it (it would judge one model alone)
    assert card[card["claim"] == CLASSIFIER_PRUNABLE].iloc[0]["seeds"] == "0, 1"
    _write(tmp_path / "p", "06_prunable_shares", [r for r in rows if r["track"] == "classifier"])
    verdicts, card = _verdicts(tmp_path)
    assert card[card["claim"] == CLASSIFIER_PRUNABLE].iloc[0]["seeds"] == "0, 1, 2"
    assert card[card["claim"] == TRANSLATION_PRUNABLE].iloc[0]["verdict"] == NOT_RUN


def test_the_papers_rows_go_with_every_seed(tmp_path):
    mine = [
        {
            "model": "nli",
            "kind": "self",
            "heads": 72,
            "significant": n,
            "significant_up": 0,
            "largest_drop": -0.01,
            "largest_gain": 0.0,
        }
        for n in (3,)
    ]
    paper = [
        {
            "model": "WMT",
            "from_paper": True,
            "kind": "enc_self",
            "heads": 96,
            "significant": 8,
            "significant_up": 4,
            "largest_drop": -0.53,
            "largest_gain": 0.24,
        }
    ]
    _write(tmp_path / "p", "03_one_head_counts", _seeded(mine, 0) + _seeded(mine, 1) + paper)
    verdicts, card = _verdicts(tmp_path)
    row = card[card["chapter"] == "03_ablating_one_head"].iloc[0]
    assert row["verdict"] == REPRODUCED and row["seeds"] == "0, 1" and "WMT" not in row["ours"]
    assert "nli 6/144" in row["ours"]  # the two seeds' heads together


FEW_MATTER = "Few heads matter alone: masking one changes the score significantly for a minority"


def test_the_likelihood_verdict_reads_the_likelihood_tables_and_disagreements_are_named(tmp_path):
    def counts(significant_mt):
        return [
            {
                "model": "nli",
                "kind": "self",
                "heads": 72,
                "significant": 3,
                "significant_up": 0,
                "largest_drop": -0.01,
                "largest_gain": 0.0,
            },
            {
                "model": "mt",
                "kind": "enc_self",
                "heads": 48,
                "significant": significant_mt,
                "significant_up": 1,
                "largest_drop": -1.0,
                "largest_gain": 0.1,
            },
        ]

    _write(tmp_path / "p", "03_one_head_counts", counts(1))  # BLEU: a minority in both models
    _write(tmp_path / "p", "03_one_head_counts_likelihood", counts(40))  # likelihood: most of mt's heads matter
    _, card = _verdicts(tmp_path)
    row = card.set_index("claim").loc[FEW_MATTER]
    assert (row["verdict"], row["likelihood verdict"]) == (REPRODUCED, PARTLY)
    assert "mt 40/48" in row["likelihood"] and row["likelihood rule"] == "the same rule"
    assert list(disagreements(card)["claim"]) == [FEW_MATTER]
    # chapters without likelihood tables: not measured, never a disagreement
    speed = card[card["chapter"] == "07_pruning_speed"]
    assert (speed["likelihood verdict"] == NOT_MEASURED).all()
    assert (
        verdict_counts(card, "likelihood verdict")[NOT_MEASURED] == (card["likelihood verdict"] == NOT_MEASURED).sum()
    )
    _write(tmp_path / "p", "03_one_head_counts_likelihood", counts(2))
    assert disagreements(_verdicts(tmp_path)[1]).empty


def test_the_last_enc_dec_layer_on_likelihood_is_read_from_the_worst_layer(tmp_path):
    def tables(worst_kind, worst_layer):
        layers = [
            {
                "kind": k,
                "layer": layer,
                "heads": str(list(range(1, 8))),
                "delta": -0.03 if (k, layer + 1) == (worst_kind, worst_layer) else 0.0,
                "delta_low": -0.035 if (k, layer + 1) == (worst_kind, worst_layer) else -0.001,
                "delta_high": -0.025 if (k, layer + 1) == (worst_kind, worst_layer) else 0.001,
                "significant": (k, layer + 1) == (worst_kind, worst_layer),
                "base": -2.0,
                "set": "test13",
            }
            for k in ("enc_self", "enc_dec", "dec_self")
            for layer in range(6)
        ]
        counts = [
            {
                "source": "translation",
                "protocol": "chosen and reported on test13",
                "kind": k,
                "layers": 6,
                "significant_down": 0,
                "margin": 0.00995,
                "unit": "millinats",
            }
            for k in ("enc_self", "enc_dec", "dec_self")
        ]
        _write(tmp_path / "p", "04_keep_one_translation_likelihood", layers)
        _write(tmp_path / "p", "04_keep_one_counts_likelihood", counts)

    claim = "The last Enc-Dec layer is the exception: it needs its heads"
    for (kind, layer), want in {
        ("enc_dec", 6): REPRODUCED,
        ("enc_dec", 3): PARTLY,
        ("dec_self", 6): NOT_REPRODUCED,
    }.items():
        tables(kind, layer)
        row = _verdicts(tmp_path)[1].set_index("claim").loc[claim]
        assert row["likelihood verdict"] == want and f"{kind} {layer} (-30.0 millinats)" in row["likelihood"]


def test_training_dynamics_on_likelihood_compare_the_perplexity_early_and_late(tmp_path):
    def rows(early, late):
        return [
            {"epoch": e, "share": share, "perplexity_ratio": 1.0 if share == 0 else r, "perplexity_ratio_se": 0.0}
            for e, r in ((1, early), (8, 1.05), (16, late))
            for share in (0.0, 0.4, 0.8)
        ]

    early_claim, late_claim = (
        "Early in training, pruning 40% of the heads hurts",
        "Later, 40% of the heads can go at little cost (unimportant heads emerge)",
    )
    for (early, late), want in {
        (1.5, 1.05): (REPRODUCED, REPRODUCED),
        (1.08, 1.05): (PARTLY, REPRODUCED),
        (1.2, 1.3): (NOT_REPRODUCED, NOT_REPRODUCED),
        (1.5, 1.2): (REPRODUCED, PARTLY),
    }.items():
        _write(tmp_path / "p", "09_importance_dynamics_likelihood", rows(early, late))
        card = _verdicts(tmp_path)[1].set_index("claim")
        assert (card.loc[early_claim, "likelihood verdict"], card.loc[late_claim, "likelihood verdict"]) == want
    assert card.loc[early_claim, "likelihood"] == (
        "perplexity x1.50 [1.50, 1.50] at the first epoch, x1.20 [1.20, 1.20] at the last (gap +0.30 [+0.30, +0.30])"
    )


def test_a_model_with_no_bleu_has_no_most_sensitive_kind(tmp_path):
    _write(
        tmp_path / "p",
        "08_pruning_by_kind_summary",
        [{"kind": k, "relative_80%": float("nan")} for k in ("enc_self", "enc_dec", "dec_self")],
    )
    verdicts, _ = _verdicts(tmp_path)
    # an unpruned BLEU of 0 leaves no share to keep: no evidence either way (before: "not reproduced")
    assert verdicts["Enc-Dec attention depends on its heads most"] == CANNOT_TELL


def test_chapter_03s_rules_are_judged_under_each_way_of_removing_a_head(tmp_path):
    """Chapter 12's claims apply chapter 03's rules to each removal kind's counts: reproduced only
    when every kind passes; a model without training seed (SmolLM2) counts with every seed."""

    def rows(significant_mean, negligible_resample):
        out = []
        for seed in (0, 1):
            for removal, sig, neg in (
                ("zero", 1, 70),
                ("mean", significant_mean, 70),
                ("resample", 1, negligible_resample),
            ):
                out.append(
                    {
                        "model": "nli",
                        "training_seed": seed,
                        "kind": "self",
                        "heads": 72,
                        "significant": sig,
                        "negligible": neg,
                        "undetermined": 0,
                        "unplaced": 0,
                        "removal": removal,
                    }
                )
        out += [
            {
                "model": "lm",
                "training_seed": None,
                "kind": "self",
                "heads": 270,
                "significant": 2,
                "negligible": 260,
                "undetermined": 0,
                "unplaced": 0,
                "removal": r,
            }
            for r in ("zero", "mean", "resample")
        ]
        return out

    few = "Few heads matter alone, whether a head is zeroed, replaced by its mean or by its output on another example"
    most = "Most heads are shown negligible alone, whichever way a head is removed"
    _write(tmp_path / "p", "12_removal_counts", rows(significant_mean=3, negligible_resample=70))
    verdicts, card = _verdicts(tmp_path)
    assert (verdicts[few], verdicts[most]) == (REPRODUCED, REPRODUCED)
    assert "lm 2/270" in card.set_index("claim").loc[few, "ours"]  # the seedless model is judged with each seed
    _write(tmp_path / "p", "12_removal_counts", rows(significant_mean=30, negligible_resample=10))
    verdicts, card = _verdicts(tmp_path)
    assert (verdicts[few], verdicts[most]) == (PARTLY, PARTLY)
    assert (
        "mean: lm 2/270; nli 60/144 (2 seeds' heads together) (partly)" in card.set_index("claim").loc[few, "ours"]
    )  # both seeds' heads
    table = removal_table("p", results_root=tmp_path)
    assert table.loc[("few_significant", "the paper's metric", "lm and nli", 0)].tolist() == [
        REPRODUCED,
        PARTLY,
        REPRODUCED,
    ]
    assert table.loc[("most_negligible", "the paper's metric", "lm and nli", 1)].tolist() == [
        REPRODUCED,
        REPRODUCED,
        PARTLY,
    ]


def _memory(saved_kv, ppl, measured_extra=0):
    """13_memory rows at batch sizes 1 and 8: 900 bytes per token and position unpruned; a third of
    the KV groups removed saves ``saved_kv`` of them (the prediction), the measured cache holding
    ``measured_extra`` bytes per token more than predicted."""
    rows = []
    for batch in (1, 8):

        def row(unit, share, per_token, extra, perplexity, batch=batch):
            predicted = per_token * 100 * batch
            return {
                "unit": unit,
                "share": share,
                "dtype": "float32",
                "batch": batch,
                "KV bytes per token": per_token,
                "KV bytes, predicted": predicted,
                "KV bytes, measured": predicted + extra * 100 * batch,
                "perplexity": perplexity,
            }

        rows += [
            row("unpruned", 0.0, 900, 0, 20.0),
            row("KV groups", 1 / 3, 900 - saved_kv, measured_extra, ppl),
            row("KV groups", 2 / 3, 300, 0, 90.0),
        ]
    return rows


@pytest.mark.parametrize(
    "saved_kv, ppl, measured_extra, expected",
    [
        (300, 21.9, 0, REPRODUCED),
        (300, 22.1, 0, PARTLY),
        (260, 21.0, 0, REPRODUCED),
        (250, 21.0, 0, NOT_REPRODUCED),
        (0, 21.0, 0, NOT_REPRODUCED),  # a cache that does not shrink
        (300, 21.0, 300, NOT_REPRODUCED),  # predicted to shrink, but the cache generation leaves does not
        (300, 35.0, 0, PARTLY),
    ],
)  # the memory bought, at +75% perplexity
def test_kv_groups_buy_memory_on_the_measured_cache(tmp_path, saved_kv, ppl, measured_extra, expected):
    # 1/3 of the groups: the measured cache must equal the prediction and shrink by at least 28.3%
    # (250 of 900 is 27.8%) at every batch size; then perplexity at most +10% for reproduced
    _write(tmp_path / "p", "13_memory", _memory(saved_kv, ppl, measured_extra))
    verdicts, card = _verdicts(tmp_path)
    assert (
        verdicts["Removing KV groups by importance shrinks the KV cache in proportion, at a small perplexity cost"]
        == expected
    )


@pytest.mark.parametrize("kept, expected", [(0.3, REPRODUCED), (0.6, PARTLY), (0.95, NOT_REPRODUCED)])
def test_copying_breaks_is_read_at_the_share_perplexity_allows(tmp_path, kept, expected):
    # read at the 10% tolerance; the 1% columns (here: nothing prunable, copying intact) are not the rule's
    _write(
        tmp_path / "p",
        "13b_copying_summary",
        [
            {
                "order": "I_h on verses",
                "unpruned copying accuracy": 0.8,
                "prunable within 1% (verses)": 0.0,
                "copying accuracy at 1%": 0.8,
                "prunable within 10% (verses)": 0.2,
                "copying accuracy at 10%": 0.8 * kept,
                "random copying accuracy at 10% (5%)": 0.8 * 0.7,
                "random copying accuracy at 10% (95%)": 0.8 * 0.9,
                "random orders at 10%": 20,  # random orders of the same share keep 70% to 90%
                "copying kept at 10%": kept,
                "copying kept at 10% (low)": kept - 0.04,
                "copying kept at 10% (high)": kept + 0.04,
                "verdict probe sequences": 32,
            },  # the verdict probe's interval over its sequences
            {
                "order": "random 0",
                "unpruned copying accuracy": 0.8,
                "prunable within 1% (verses)": 0.0,
                "copying accuracy at 1%": 0.8,
                "prunable within 10% (verses)": 0.1,
                "copying accuracy at 10%": 0.0,
            },
        ],
    )
    verdicts, card = _verdicts(tmp_path)
    row = card[card["claim"].str.startswith("Pruning that keeps perplexity")].iloc[0]
    assert row["verdict"] == expected and f"copying keeps {kept:.0%} of its accuracy" in row["ours"]


def _induction(importance_ranks, effect_ranks, heads=270):
    """13b_induction rows: heads 0-4 are the five strongest induction heads, with the given ranks
    by I_h and by one-head effect; the other heads take the remaining ranks in order."""

    def fill(chosen):
        rest = iter(r for r in range(1, heads + 1) if r not in chosen)
        return list(chosen) + [next(rest) for _ in range(heads - len(chosen))]

    by_importance, by_effect = fill(importance_ranks), fill(effect_ranks)
    return [
        {
            "layer": h // 9,
            "head": h % 9,
            "induction rank": h + 1,
            "rank by I_h on verses": by_importance[h],
            "rank by one-head effect on verses": by_effect[h],
        }
        for h in range(heads)
    ]


UNRELATED = [12, 140, 200, 77, 160]  # the five induction heads where importance put them by chance: mean 118
LOW = [209, 230, 251, 260, 265]  # the course build's picture: all five in the bottom quarter


@pytest.mark.parametrize(
    "by_importance, by_effect, expected",
    [
        (LOW, UNRELATED, REPRODUCED),
        (UNRELATED, LOW, PARTLY),
        (UNRELATED, UNRELATED, NOT_REPRODUCED),  # importance unrelated to induction
        ([140, 5, 10, 20, 30], [150, 3, 4, 6, 8], NOT_REPRODUCED),
    ],
)  # one head in the lower half: the old rule said reproduced
def test_induction_heads_underrated_is_a_permutation_test_on_the_mean_rank(
    tmp_path, by_importance, by_effect, expected
):
    _write(tmp_path / "p", "13b_induction", _induction(by_importance, by_effect))
    verdicts, card = _verdicts(tmp_path)
    assert verdicts["Importance on ordinary text can call the heads that copy unimportant"] == expected
    assert "permutation p = " in card[card["claim"].str.startswith("Importance on ordinary")].iloc[0]["ours"]


def test_the_rank_permutation_test_holds_its_level_and_finds_a_real_shift():
    from helpers.heads.significance import mean_rank_p

    rng = np.random.default_rng(3)
    null_p = [mean_rank_p(rng.choice(270, 5, replace=False) + 1, 270, draws=2000, seed=s) for s in range(300)]
    assert np.mean(np.array(null_p) < 0.05) < 0.05 + 3 * np.sqrt(0.05 * 0.95 / 300)  # heads drawn at random
    assert mean_rank_p(LOW, 270) < 0.001 and mean_rank_p([1, 2, 3, 4, 5], 270) > 0.99
    with pytest.raises(ValueError, match="between 1 and total"):
        mean_rank_p([0, 5], 270)


def test_the_card_shows_its_rules_folded_under_each_claim():
    from helpers.book.scorecard.card_html import card_table

    card = pd.DataFrame(
        [
            {
                "section": "§3",
                "claim": "A < B & C",
                "paper": "8 of 96",
                "ours": "9",
                "verdict": REPRODUCED,
                "likelihood": "x",
                "likelihood verdict": NOT_MEASURED,
                "seeds": "0, 1",
                "rule": "under 20%",
                "likelihood rule": "the same rule",
                "chapter": "03_ablating_one_head",
            }
        ]
    )
    html = card_table(card)
    assert '<td>A &lt; B &amp; C<details class="rule"><summary>rule</summary><b>Rule:</b> under 20%' in html
    assert "On the likelihood" not in html  # not measured there: no likelihood rule shown
    assert "03_ablating_one_head" in html and "0, 1" in html and html.count("<tr>") == 2
    assert 'background-color: #d8f0d2">reproduced' in html


def test_the_card_shows_the_sample_and_resolution_each_one_head_verdict_rests_on(tmp_path):
    from helpers.book.scorecard.card_html import card_table

    rows = [
        {
            "model": model,
            "training_seed": seed,
            "kind": "self",
            "heads": 72,
            "significant": 2,
            "significant_up": 0,
            "negligible": 66,
            "undetermined": 4,
            "unplaced": 4,
            "largest_gain": -0.001,
            "from_paper": False,
            "examples": n,
            "resolution": res,
            "unit": unit,
        }
        for model, n, res, unit in (("nli", 1000, 0.0104, "accuracy"), ("translation", 200, 0.31, "BLEU"))
        for seed in (0, 1)
    ]
    _write(tmp_path / "p", "03_one_head_counts", rows)
    verdicts, card = _verdicts(tmp_path)
    row = card.set_index("claim").loc[
        "Few heads matter alone: masking one changes the score significantly for a minority"
    ]
    assert row["sample"] == "nli: n = 1,000, ±0.01 accuracy; translation: n = 200, ±0.31 BLEU"
    assert row["likelihood sample"] == ""  # no likelihood tables
    assert "tested on nli: n = 1,000" in card_table(card)
    # a table from before the columns existed shows no sample rather than failing
    _write(
        tmp_path / "p",
        "03_one_head_counts",
        [{k: v for k, v in r.items() if k not in ("examples", "resolution")} for r in rows],
    )
    assert set(scorecard("p", results_root=tmp_path)["sample"]) == {""}
    # two looks: the rows that stopped at the first look rest on its examples, and the card says so
    _write(
        tmp_path / "p",
        "03_one_head_counts",
        [
            {
                **r,
                "first_look_rows": 30 if r["model"] == "nli" else 0,
                "first_look_examples": 500 if r["model"] == "nli" else None,
            }
            for r in rows
        ],
    )
    assert scorecard("p", results_root=tmp_path).set_index("key").loc["few_significant", "sample"] == (
        "nli: n = 1,000 (60 of 144 rows on the first look's 500), ±0.01 accuracy; translation: n = 200, ±0.31 BLEU"
    )


def test_the_card_shows_what_a_correlation_and_a_timing_rest_on(tmp_path):
    # the smallest significant |r| at p < 0.01 with n heads, by hand: t = r sqrt((n - 2) / (1 - r^2))
    from scipy.stats import t

    _write(
        tmp_path / "p",
        "05_cross_domain_r",
        [
            {"model": "mt", "kind": "all", "heads": 144, "pearson_r": 0.6, "p_value": 1e-9},
            {"model": "mt", "kind": "enc_self", "heads": 48, "pearson_r": 0.2, "p_value": 0.2},
            {"model": "nli", "kind": "self", "heads": 72, "pearson_r": 0.5, "p_value": 1e-5},
        ],
    )
    rng = np.random.default_rng(0)
    for name, heads in (("05_cross_domain_translation", 144), ("05_cross_domain_classifier", 72)):
        x = rng.standard_normal(heads)
        rows = [{"delta_in": a, "delta_out": a + b} for a, b in zip(x, rng.standard_normal(heads))]
        _write(tmp_path / "p", name, rows)
    from helpers.sweeps.throughput import speed_gains

    speed = [
        {
            "batch_size": b,
            "variant": v,
            "median": 100.0,
            "iqr": iqr,
            "runs": "[99.0, 100.0, 101.0]",
            "flops": 50 if v == "pruned" else 100,
            "device": "cpu",
        }
        for b, iqr in ((1, 2.0), (64, 5.0))
        for v in ("original", "pruned", "gated")
    ]
    _write(tmp_path / "p", "07_speed", speed)
    _write(tmp_path / "p", "07_speed_gains", speed_gains(pd.DataFrame(speed)).to_dict("records"))
    _, card = _verdicts(tmp_path)
    sample = dict(zip(card["key"] if "key" in card else card["claim"], card["sample"]))
    cross = next(v for k, v in sample.items() if "in domain" in str(k) or k == "cross_domain")
    for n, shown in ((144, "mt: n = 144 heads"), (72, "nli: n = 72 heads")):
        r = t.ppf(0.995, n - 2) / (n - 2 + t.ppf(0.995, n - 2) ** 2) ** 0.5
        assert f"{shown}, |r| >= {r:.2f} detectable at p < 0.01" in cross
    speed = next(v for k, v in sample.items() if "large batches" in str(k) or k == "speedup_large")
    assert speed == "3 timed passes per variant and batch; timing noise up to 5.0% (IQR / median)"


def test_a_claim_on_tables_without_seeds_has_no_seeds_whatever_other_tables_hold(tmp_path):
    """SmolLM2 has no training seed: a claim that reads only its tables is judged once, with no
    "seeds 0, 1" borrowed from the translation model's tables in the same folder."""
    from helpers.book.verdicts.engine import POOLED, Claim, judge

    _write(tmp_path, "00_seeded", [{"model": "mt", "training_seed": s, "value": 0.1 * s} for s in (0, 1)])
    _write(tmp_path, "00_language_model", [{"model": "smollm2", "value": 0.5}])

    def reading(table):
        return lambda r: (f"{r[table]['value'].mean():.2f}", REPRODUCED)

    def claim(table):
        return Claim(table, "§0", "a claim", "x", "a rule", "00_chapter", reading(table))

    unseeded = judge(claim("00_language_model"), tmp_path)
    assert [(r["training_seed"], r["ours"]) for r in unseeded] == [(None, "0.50"), (POOLED, "0.50")]
    assert unseeded[-1]["seeds"] == ""
    seeded = judge(claim("00_seeded"), tmp_path)
    assert [r["training_seed"] for r in seeded] == [0, 1, POOLED] and seeded[-1]["seeds"] == "0, 1"
