"""The registry of the paper's claims and the scorecard: every chapter's claims (``chapters/chNN_*``),
judged by ``engine``, one row per claim. The chapters judge their own claims with their own rules
module; only the scorecard's page (and the front page) read them all.

    from helpers.book.scorecard.card import scorecard
    scorecard("course")   # DataFrame: section, claim, paper, ours, verdict, likelihood, ..., rule, chapter
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..chapters import ch03_ablating_one_head as ch03
from ..chapters import ch04_keeping_one_head as ch04
from ..chapters import ch05_cross_domain as ch05
from ..chapters import ch06_pruning_curves as ch06
from ..chapters import ch07_pruning_speed as ch07
from ..chapters import ch08_attention_kinds as ch08
from ..chapters import ch09_training_dynamics as ch09
from ..chapters import ch10_appendix_more_tasks as ch10
from ..chapters import ch12_unimportant_or_unmeasured as ch12
from ..chapters import ch13_what_removing_heads_buys as ch13
from ..chapters import ch13b_what_removing_heads_breaks as ch13b
from ..chapters import ch14_memory_budget as ch14
from ..chapters import ch14b_served_at_equal_memory as ch14b
from ..verdicts.engine import (
    LIKELIHOOD,
    NOT_MEASURED,
    NOT_RUN,
    VERDICTS,
    Claim,
    judge,
    results_folder,
    sample_of,
)

_CHAPTER_RULES = (ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch12, ch13, ch13b, ch14, ch14b)  # in book order
CLAIMS: list[Claim] = [c for module in _CHAPTER_RULES for c in module.CLAIMS]
CLAIMS_BY_KEY = {c.key: c for c in CLAIMS}


def scorecard(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """One row per claim, its one answer per measure (``engine.judge``: every seed's evidence
    together): key, section, claim, paper, ours, verdict, likelihood, likelihood verdict, seeds
    (those pooled), each seed and seeds differ (and their likelihood columns), rule, likelihood
    rule, chapter, profile, and what the verdicts rest on (``sample``, ``likelihood sample``:
    ``Claim.sample``); read from ``results_root/<profile>`` (default: where the chapters write,
    ``results.results_root()``)."""
    folder = results_folder(profile, results_root)
    rows = []
    for c in CLAIMS:
        metric = judge(c, folder, "")[-1]
        likely = judge(c, folder, LIKELIHOOD)[-1]
        rows.append(
            {
                "key": c.key,
                "section": c.section,
                "claim": c.claim,
                "paper": c.paper,
                "ours": metric["ours"],
                "verdict": metric["verdict"],
                "likelihood": likely["ours"],
                "likelihood verdict": likely["verdict"],
                "seeds": metric.get("seeds", ""),
                "each seed": metric.get("each seed", ""),
                "seeds differ": metric.get("seeds differ", ""),
                "likelihood each seed": likely.get("each seed", ""),
                "likelihood seeds differ": likely.get("seeds differ", ""),
                "rule": metric["rule"],
                "likelihood rule": likely["rule"],
                "chapter": c.chapter,
                "profile": profile,
                "sample": sample_of(c, folder) if metric["verdict"] != NOT_RUN else "",
                "likelihood sample": sample_of(c, folder, LIKELIHOOD)
                if likely["verdict"] not in (NOT_RUN, NOT_MEASURED)
                else "",
            }
        )
    return pd.DataFrame(rows)


def disagreements(card: pd.DataFrame) -> pd.DataFrame:
    """The claims whose verdict on the paper's metric differs from their likelihood verdict
    (claims measured on both)."""
    both = card[~card["likelihood verdict"].isin([NOT_MEASURED, NOT_RUN]) & (card["verdict"] != NOT_RUN)]
    return both[both["verdict"] != both["likelihood verdict"]]


def verdict_counts(card: pd.DataFrame, column: str = "verdict") -> dict[str, int]:
    """How many claims have each verdict in ``column`` (``verdict`` or ``likelihood verdict``)."""
    counts = card[column].value_counts()
    return {v: int(counts.get(v, 0)) for v in (*VERDICTS, NOT_MEASURED) if column != "verdict" or v != NOT_MEASURED}
