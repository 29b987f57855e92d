"""The front page follows the results: change a verdict in a hand-made table and its answer and
its verdict grid change with it; with no results it says so; its profile table is read from the
profiles."""

import re
from html import escape

import pandas as pd

from helpers.book.profiles.profile import load_profile
from helpers.book.scorecard import front_page
from helpers.book.scorecard.card import CLAIMS, scorecard
from helpers.book.scorecard.card_html import COLOURS

TRANSLATION = "A share of the translation model's heads can be pruned with no noticeable loss"


def _shares(folder, translation: float):
    folder.mkdir(parents=True, exist_ok=True)
    held_out = {"selected_on": "held-out half of the scored split"}
    pd.DataFrame(
        [
            {
                "track": "translation",
                "model": "mt",
                "order": o,
                "prunable_share": s,
                "share_se": 0.02,
                "minus_ablation_se": 0.02,
                **held_out,
            }
            for o, s in (("importance", translation), ("ablation", 0.1))
        ]
        + [
            {
                "track": "classifier",
                "model": "nli",
                "order": o,
                "prunable_share": s,
                "share_se": 0.02,
                "minus_ablation_se": 0.02,
                **held_out,
            }
            for o, s in (("importance", 0.4), ("ablation", 0.1))
        ]
    ).to_csv(folder / "06_prunable_shares.csv", index=False)


def _cell(html: str, claim: str) -> str:
    """The first verdict cell of ``claim``'s row in the grid's HTML."""
    row = re.search(re.escape(escape(claim)) + r"</a></td>(.*?)</tr>", html).group(1)
    return re.search(r'background-color: (#\w+)">([^<]*)</td>', row).groups()


def test_the_answer_and_the_grid_follow_a_changed_verdict(tmp_path):
    for share, verdict in ((0.2, "reproduced"), (0.05, "partly")):
        _shares(tmp_path / "p", share)
        card = scorecard("p", results_root=tmp_path)
        text = front_page.answer(card)
        first = text.split("\n\n")[0]
        assert "hold" in first and not re.search(r"\d", first)  # the plain answer first, no tally in it
        assert f"*{TRANSLATION}*: **{verdict}** (likelihood: **not run**)" not in text  # no likelihood table
        assert f"*{TRANSLATION}*: **{verdict}**; ours {share:.0%} [" in text and "the paper about 20%" in text
        grid = front_page.verdict_grid("p", results_root=tmp_path)
        row = grid[(grid["key"] == "prunable_translation") & (grid["measure"] == "metric")]
        assert list(row["verdict"]) == [verdict]
        html = front_page.grid_html(grid)
        assert _cell(html, TRANSLATION) == (COLOURS[verdict], verdict)
        assert f'<a href="06_pruning_curves.html">{escape(TRANSLATION)}</a>' in html
    # one sentence per measure, on the claims judged here (chapter 06's that its table decides)
    judged = int(((card["verdict"] != "not run") & ~card["section"].str.startswith("Beyond")).sum())
    assert judged >= 2 and f"of the paper's claims tested here ({judged})" in text
    assert "On the paper's own metric (BLEU, accuracy), " in text
    assert re.search(rf"\({judged}\), \d holds?, \d holds? in part, \d (do|does) not", text)
    assert "On the likelihood of the same outputs, nothing has been judged yet." in text


def test_every_claim_has_a_row_grouped_by_part(tmp_path):
    _shares(tmp_path / "p", 0.2)
    grid = front_page.verdict_grid("p", results_root=tmp_path)
    assert list(dict.fromkeys(grid["key"])) == [c.key for c in CLAIMS]
    html = front_page.grid_html(grid)
    assert html.count('<tr class="part">') == grid["part"].nunique() and front_page.BEYOND in set(grid["part"])


def test_with_no_build_the_page_says_so(tmp_path):
    card = scorecard("empty", results_root=tmp_path)
    assert front_page.answer(card).startswith("**No chapter has run on the empty profile yet**")
    assert front_page.beyond(card) == "The chapters beyond the paper have not run on this profile."


def test_the_profile_table_names_the_models_each_profile_studies():
    table = front_page.profile_table().set_index("profile")
    for name in ("smoke", "course", "paper"):
        settings = load_profile(name)
        studied = table.loc[name, "models of chapters 02-10"]
        assert all(
            f"{m}: " in studied or f"{m} ({spec['task']}): " in studied
            for m, spec in settings.models.items()
            if spec.get("task")
        )
        assert table.loc[name, "language model of chapters 11-13"] == settings.defaults["language_model"]
    assert "smollm2" in table.loc["course", "language model of chapters 11-13"]
    assert "bert-base-uncased" in table.loc["paper", "models of chapters 02-10"]


def test_chapter_14s_sentence_names_a_best_way_to_spend_the_bytes_only_where_it_is_clear(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    assert front_page.memory_line("p", tmp_path) == ""  # before chapter 14 has run
    points = pd.DataFrame(
        [
            {"method": "quantized", "setting": "fp8", "bytes share": 0.5001, "perplexity ratio": 1.01},
            {"method": "quantized", "setting": "2-bit", "bytes share": 0.24, "perplexity ratio": 1.30},
            {"method": "KV groups removed", "setting": "45 of 90", "bytes share": 0.5, "perplexity ratio": 3.5},
            {"method": "windowed heads", "setting": "14 full", "bytes share": 0.249, "perplexity ratio": 1.2},
        ]
    )
    budgets = pd.DataFrame(
        [
            {"budget": 0.5, "best": "quantized", "best setting": "fp8", "runner-up": "windowed heads"},
            {"budget": 0.25, "best": "windowed heads", "best setting": "14 full", "runner-up": "quantized"},
        ]
    ).assign(clear=[True, False])
    points.to_csv(folder / "14_points.csv", index=False)
    budgets.to_csv(folder / "14_budgets.csv", index=False)
    line = front_page.memory_line("p", tmp_path)
    assert "50% of the bytes the best way to spend them is quantized (fp8: perplexity x1.01" in line
    assert "Removing KV groups by importance to fit costs x3.50" in line
    # a gap within the tolerance or an interval holding 0 names no best
    assert "25% of the bytes no way is clearly best: windowed heads and quantized are within" in line
    assert "The lowest is windowed heads (14 full" in line
    assert "every method at equal bytes" not in line


def test_chapter_11s_sentence_says_when_its_calibrated_level_is_0(tmp_path):
    # the old line printed "0 of 270 heads (5.4 expected by chance)" without saying that at a
    # calibrated level of 0 no head could have been significant
    folder = tmp_path / "p"
    folder.mkdir()
    shares = pd.DataFrame(
        [{"unit": "query heads", "order": "importance", "prunable within 1%": 0.1, "prunable within 10%": 0.3}]
    )
    shares.to_csv(folder / "11_prunable_shares.csv", index=False)
    pd.DataFrame({"set": ["select", "report"], "verses": [120, 120]}).to_csv(folder / "11_sets.csv", index=False)
    counts = {"heads": 270, "significantly worse": 0, "significantly better": 0, "expected by chance": 5.4}
    for level, said in (
        (0.0, "These verses are too few for the test to call any head significant (a calibrated level of 0)"),
        (0.004, "calibrated p < 0.004"),
    ):
        pd.DataFrame([{**counts, "level": level}]).to_csv(folder / "11_one_head_counts.csv", index=False)
        line = front_page.language_model_line("p", tmp_path)
        assert "0 of 270 heads" in line and said in line, line
        assert "cannot decide" not in line


def test_chapter_11s_sentence_says_its_run_cannot_decide_on_fewer_verses_than_the_minimum(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    pd.DataFrame(
        [{"unit": "query heads", "order": "importance", "prunable within 1%": 0.1, "prunable within 10%": 0.3}]
    ).to_csv(folder / "11_prunable_shares.csv", index=False)
    pd.DataFrame({"set": ["select", "report"], "verses": [8, 8]}).to_csv(folder / "11_sets.csv", index=False)
    counts = {"heads": 270, "significantly worse": 50, "significantly better": 3, "expected by chance": 5.4}
    pd.DataFrame([{**counts, "level": 0.01}]).to_csv(folder / "11_one_head_counts.csv", index=False)
    line = front_page.language_model_line("p", tmp_path)
    assert "53 of 270 heads" in line
    assert "rest on 8 verses, under the book's minimum of 30: this run cannot decide which heads matter" in line


def test_the_answer_says_in_a_sentence_what_to_believe():
    def card(verdicts: list[str]) -> pd.DataFrame:
        return pd.DataFrame(
            {"claim": [f"claim {i}" for i in range(len(verdicts))], "verdict": verdicts, "section": "§3"}
        )

    held = front_page.believe(card(["reproduced"] * 5 + ["partly"]), "verdict", "On the metric")
    assert held.startswith("On the metric, the findings hold on these models: of the paper's claims tested here (6),")
    refuted = front_page.believe(card(["not reproduced"] * 4 + ["reproduced"]), "verdict", "On the metric")
    assert (
        "most of the findings do not hold" in refuted
        and "4 do not and 0 cannot be decided on this data. Not reproduced: *claim 0*; *claim 1*; *claim 2*; and more."
        in refuted
    )
    # the verb agrees with its count
    assert "(6), 5 hold, 1 holds in part, 0 do not and" in held and "(5), 1 holds, 0 hold in part, 4 do not" in refuted
    one = front_page.believe(card(["not reproduced"] + ["reproduced"] * 3), "verdict", "On the metric")
    assert "3 hold, 0 hold in part, 1 does not and 0 cannot be decided on this data. Not reproduced: *claim 0*." in one
    unsure = front_page.believe(card(["cannot tell"] * 3 + ["reproduced"] * 2), "verdict", "On the metric")
    assert "cannot settle most of the findings" in unsure and "3 cannot be decided on this data" in unsure
    assert front_page.few_words("nli 56/288; translation 20/288") == "nli 56/288"
    # the course build of 7 December: 7 reproduced, 11 partly, 6 cannot tell of 24 is not "the findings hold"
    course = front_page.believe(
        card(["reproduced"] * 7 + ["partly"] * 11 + ["cannot tell"] * 6), "verdict", "On the metric"
    )
    assert course.startswith("On the metric, most of the findings hold on these models, many of them only in part")


def test_a_headline_gives_every_models_evidence_whole(tmp_path):
    """A headline claim's evidence is not cut to its first model: "most heads are negligible" held
    for the classifier and not for the translator, and the page showed the classifier's part alone."""
    _shares(tmp_path / "p", 0.2)
    card = scorecard("p", results_root=tmp_path)
    key = card["key"] == "most_negligible"
    evidence = "nli 127/144 negligible, 17 undetermined; translation 114/288 negligible, 174 undetermined"
    card.loc[key, ["ours", "verdict"]] = [evidence, "partly"]
    assert f"; ours {evidence}; the paper" in front_page.answer(card)


def test_the_claims_beyond_the_paper_are_counted_as_the_sentence_above_counts_them(tmp_path):
    """Chapter 12 asks two of the paper's claims again: the list beyond the paper shows them, and
    its count, like the answer's sentence on the claims beyond the paper, leaves them out."""
    rows = [
        ("twelve", "§3.2, Table 1", "12_unimportant_or_unmeasured", "reproduced"),
        ("fourteen a", f"{front_page.BEYOND}, KV memory", "14_memory_budget", "reproduced"),
        ("fourteen b", f"{front_page.BEYOND}, KV memory", "14_memory_budget", "not reproduced"),
    ]
    card = pd.DataFrame(
        [
            {"claim": c, "section": s, "chapter": ch, "verdict": v, "likelihood verdict": "not measured", "ours": "x"}
            for c, s, ch, v in rows
        ]
    ).assign(profile="p")
    text = front_page.beyond(card, results_root=tmp_path)
    assert text.startswith("Of the 2 claims beyond the paper, 1 is reproduced")
    assert "The list also gives the 1 of the paper's claims that chapter 12 asks again." in text
    assert "*twelve*: **reproduced**. Ours: x." in text
    sentence = front_page.believe(card[card["section"].str.startswith(front_page.BEYOND)], "verdict", "Beyond")
    assert "(2), 1 holds, 0 hold in part, 1 does not" in sentence
