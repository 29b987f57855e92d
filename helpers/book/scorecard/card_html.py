"""The scorecard as a table a reader can scan: section, claim, the paper's value, ours (on every
seed's evidence together) and the two verdicts, with each claim's rule (and its chapter and the
seeds pooled) folded under the claim, and under ours the sample a one-head verdict rests on, each
seed's own value and verdict, and whether the seeds differ.

    from IPython.display import HTML
    HTML(card_table(scorecard("course")))
"""

from __future__ import annotations

from html import escape

import pandas as pd

COLOURS = {
    "reproduced": "#d8f0d2",
    "partly": "#fbefc4",
    "cannot tell": "#ece3f3",
    "not reproduced": "#f6d0cc",
    "not run": "#e6e6e6",
    "not measured": "#f4f4f4",
}
_SHOWN = ("section", "claim", "paper", "ours", "verdict", "likelihood", "likelihood verdict")
_SAMPLES = {"ours": "sample", "likelihood": "likelihood sample"}  # shown under the value, where a claim has one
_SEEDS = {"ours": ("each seed", "seeds differ"), "likelihood": ("likelihood each seed", "likelihood seeds differ")}


def _rule(row: pd.Series) -> str:
    parts = [f"<b>Rule:</b> {escape(str(row['rule']))}"]
    if row.get("likelihood verdict") != "not measured" and str(row.get("likelihood rule", "")) not in ("", "nan"):
        parts.append(f"<b>On the likelihood:</b> {escape(str(row['likelihood rule']))}")
    parts.append(
        f"<b>Chapter:</b> {escape(str(row['chapter']))}; <b>seeds pooled:</b> {escape(str(row.get('seeds', '')))}"
    )
    return '<details class="rule"><summary>rule</summary>' + "<br>".join(parts) + "</details>"


def _cell(row: pd.Series, column: str) -> str:
    value = "" if pd.isna(row[column]) else str(row[column])
    if column == "claim":
        return f"<td>{escape(value)}{_rule(row)}</td>"
    if column in ("verdict", "likelihood verdict"):
        return f'<td style="background-color: {COLOURS.get(value, "#ffffff")}">{escape(value)}</td>'
    under = []
    sample = row.get(_SAMPLES.get(column, ""), "")
    if isinstance(sample, str) and sample:  # what the one-head tests rest on, under the value they gave
        under.append(f'<small class="sample">tested on {escape(sample)}</small>')
    each, differ = (row.get(c, "") for c in _SEEDS.get(column, ("", "")))
    if isinstance(each, str) and each:  # the pooled answer's seeds, each on its own, and whether they differ
        under.append(f'<small class="seeds">each seed: {escape(each)}; seeds differ: {escape(str(differ))}</small>')
    return f"<td>{'<br>'.join([escape(value), *under])}</td>"


def card_table(card: pd.DataFrame) -> str:
    """HTML: one row per claim with the ``_SHOWN`` columns, verdicts coloured, each claim's rule in
    a ``<details>`` under it (closed)."""
    head = "".join(f"<th>{escape(c)}</th>" for c in _SHOWN)
    rows = "".join("<tr>" + "".join(_cell(row, c) for c in _SHOWN) + "</tr>" for _, row in card.iterrows())
    return f'<table class="scorecard"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
