"""The scorecard as a table a reader can scan: section, claim, the paper's value, ours and the two
verdicts, with each claim's rule (and its chapter and seeds) folded under the claim, and under
ours the sample a one-head verdict rests on and the change its test resolves.

    from IPython.display import HTML
    HTML(card_table(scorecard("course")))
"""

from __future__ import annotations

from html import escape

import pandas as pd

COLOURS = {
    "reproduced": "#d8f0d2",
    "partly": "#fbefc4",
    "depends on the seed": "#dfe4f7",
    "cannot tell": "#ece3f3",
    "not reproduced": "#f6d0cc",
    "not run": "#e6e6e6",
    "not measured": "#f4f4f4",
}
SHOWN = ("section", "claim", "paper", "ours", "verdict", "likelihood", "likelihood verdict")
SAMPLES = {"ours": "sample", "likelihood": "likelihood sample"}  # shown under the value, where a claim has one


def _rule(row: pd.Series) -> str:
    parts = [f"<b>Rule:</b> {escape(str(row['rule']))}"]
    if row.get("likelihood verdict") != "not measured" and str(row.get("likelihood rule", "")) not in ("", "nan"):
        parts.append(f"<b>On the likelihood:</b> {escape(str(row['likelihood rule']))}")
    parts.append(
        f"<b>Chapter:</b> {escape(str(row['chapter']))}; <b>seeds checked:</b> {escape(str(row.get('seeds', '')))}"
    )
    return '<details class="rule"><summary>rule</summary>' + "<br>".join(parts) + "</details>"


def _cell(row: pd.Series, column: str) -> str:
    value = "" if pd.isna(row[column]) else str(row[column])
    if column == "claim":
        return f"<td>{escape(value)}{_rule(row)}</td>"
    if column in ("verdict", "likelihood verdict"):
        return f'<td style="background-color: {COLOURS.get(value, "#ffffff")}">{escape(value)}</td>'
    sample = row.get(SAMPLES.get(column, ""), "")
    if isinstance(sample, str) and sample:  # what the one-head tests rest on, under the value they gave
        return f'<td>{escape(value)}<br><small class="sample">tested on {escape(sample)}</small></td>'
    return f"<td>{escape(value)}</td>"


def card_table(card: pd.DataFrame) -> str:
    """HTML: one row per claim with the ``SHOWN`` columns, verdicts coloured, each claim's rule in
    a ``<details>`` under it (closed)."""
    head = "".join(f"<th>{escape(c)}</th>" for c in SHOWN)
    rows = "".join("<tr>" + "".join(_cell(row, c) for c in SHOWN) + "</tr>" for _, row in card.iterrows())
    return f'<table class="scorecard"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
