"""A claim's threshold that its chapter also has as a parameter is read from the values the chapter
ran with, so changing it is a change in one place: the chapter's parameter (``-p band_budget=0.25``),
which the chapter, its verdicts and the scorecard then all follow."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import papermill as pm
import pytest

from helpers.book.chapters import ch14_memory_budget as ch14
from helpers.book.verdicts.engine import CANNOT_TELL, NOT_REPRODUCED, REPRODUCED, chapter_verdicts, judge

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "helpers" / "book" / "chapters").glob("ch*.py"))
BAND = next(c for c in ch14.CLAIMS if c.key == "importance_beats_random_groups")


def _band_points(budget: float, ours: float, orders: int = 20) -> pd.DataFrame:
    """14_points with KV groups removed by importance at 0.5 and at ``budget`` (perplexity ratio
    ``ours`` at ``budget``, far worse at 0.5), and ``orders`` random orders drawn at ``budget``."""
    common = {"sequences": 32, "scored tokens": 4096}
    rows = [
        {"method": ch14.REMOVED, "setting": "a", "budget": 0.5, "bytes share": 0.5, "perplexity ratio": 9.0},
        {"method": ch14.REMOVED, "setting": "b", "budget": budget, "bytes share": budget, "perplexity ratio": ours},
    ]
    rows += [
        {"method": ch14.RANDOM, "setting": f"order {r}", "budget": budget, "bytes share": budget}
        | {"perplexity ratio": 1.5 + r / orders}
        for r in range(orders)
    ]
    return pd.DataFrame([row | common for row in rows])


def _answer(verdicts: pd.DataFrame) -> str:
    return verdicts[verdicts["training_seed"] == "all"]["verdict"].iloc[0]


@pytest.mark.parametrize("ours, expected", [(1.2, REPRODUCED), (2.0, NOT_REPRODUCED)])
def test_chapter_14s_band_rule_reads_the_band_budget_the_chapter_ran_with(tmp_path, ours, expected):
    folder = tmp_path / "p"
    folder.mkdir()
    _band_points(0.25, ours).to_csv(folder / "14_points.csv", index=False)
    # the chapter's run at band_budget=0.25: its verdicts, then the scorecard's reading of the same run
    assert _answer(chapter_verdicts("p", [BAND], results_root=tmp_path, band_budget=0.25)) == expected
    assert judge(BAND, folder)[-1]["verdict"] == expected
    # the same tables judged at the default budget (0.5) find no band there: the parameter is what decides
    (folder / "parameters" / f"{ch14.CHAPTER}.json").unlink()
    assert judge(BAND, folder)[-1]["verdict"] == CANNOT_TELL


def test_the_band_budgets_default_is_defined_once_and_equals_the_notebooks():
    declared = pm.inspect_notebook(str(ROOT / "notebooks" / f"{ch14.CHAPTER}.ipynb"))
    assert BAND.parameters == {"band_budget": ch14.Plan.band_budget}
    assert float(declared["band_budget"]["default"]) == ch14.Plan.band_budget
    assert not hasattr(ch14, "BAND_BUDGET")


def _rule_names(tree: ast.Module) -> set[str]:
    """Every name read inside the module's rule checks (functions whose first argument is ``Results``)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.args.args:
            annotation = node.args.args[0].annotation
            if isinstance(annotation, ast.Name) and annotation.id == "Results":
                names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return names


def _shadowing(module: Path, parameters: set[str], read: set[str]) -> list[str]:
    """Numeric constants (thresholds) a rule of ``module`` reads that spell one of its chapter's
    parameters, where no claim of the chapter reads that parameter from the chapter's run
    (``Claim.parameters``)."""
    tree = ast.parse(module.read_text())
    constants = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, int | float)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.isupper()
    }
    spelled = {c for c in constants & _rule_names(tree) if c.lower() in parameters}
    return sorted(c for c in spelled if c.lower() not in read)


@pytest.mark.parametrize("module", CHAPTERS, ids=lambda p: p.stem)
def test_no_rule_retypes_a_parameter_of_its_chapter(module):
    import importlib

    chapter = module.stem.removeprefix("ch")
    parameters = set(pm.inspect_notebook(str(ROOT / "notebooks" / f"{chapter}.ipynb")))
    claims = getattr(importlib.import_module(f"helpers.book.chapters.{module.stem}"), "CLAIMS", [])
    read = {name for claim in claims for name in claim.parameters}
    assert _shadowing(module, parameters, read) == []


def test_the_shadowing_check_can_fail(tmp_path):
    module = tmp_path / "ch99_made_up.py"
    module.write_text(
        "BAND_BUDGET = 0.5\ndef rule(r: Results):\n    return BAND_BUDGET\ndef helper(table):\n    return OTHER\n"
    )
    assert _shadowing(module, {"band_budget", "other", "translation"}, read=set()) == ["BAND_BUDGET"]
    assert _shadowing(module, {"band_budget"}, read={"band_budget"}) == []


def test_every_claim_prints_its_one_rule_with_its_parameters():
    """Above each verdict table stands each claim's rule, the one the scorecard shows: a short
    sentence per verdict it names; a rule that reads a chapter parameter says the value the
    chapter ran with, not its default."""
    import re

    from helpers.book.chapters.ch14_memory_budget import CLAIMS as CH14
    from helpers.book.scorecard.card import CLAIMS
    from helpers.book.verdicts.engine import rule_text

    for claim in CLAIMS:
        text = rule_text(claim)
        sentences = re.split(r"(?<=\.) (?=[A-Z])", text)
        assert text.endswith(".") and "{" not in text, (claim.key, text)
        assert max(len(s.split()) for s in sentences) <= 45, (claim.key, text)
        assert text.startswith(("Reproduced", "As the claim above", "Each removal")), (claim.key, text)
    band = next(c for c in CH14 if c.key == "importance_beats_random_groups")
    assert "at 50% of the bytes" in rule_text(band)
    assert "at 25% of the bytes" in rule_text(band, {"band_budget": 0.25})


def test_a_claim_without_its_rule_is_refused():
    from dataclasses import replace

    from helpers.book.scorecard.card import CLAIMS
    from helpers.book.verdicts.engine import rule_text

    with pytest.raises(ValueError, match="has no rule"):
        rule_text(replace(CLAIMS[0], rule=""))
