"""The book's front page, generated: our answer to the paper's question in a few sentences, one
grid of every claim's one answer per measure (linked to its chapter), what the
chapters beyond the paper found, and the models each profile studies. Every word that carries a
number or a verdict comes from the registry (``scorecard``) and the tables of the build that
renders the page; where no chapter has run, the page says so.

    grid = verdict_grid("course")      # one row per claim and measure: its one answer
    HTML(grid_html(grid))              # the figure: claims x measures, coloured by verdict
    Markdown(answer(scorecard("course")))
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

import pandas as pd

from ...heads.significance import MIN_UNITS
from ..chapters.ch14_memory_budget import CLAIMED_BUDGETS, FIT, REMOVED
from ..profiles.profile import chapter_parameters, load_profile, profile_folders
from ..store import measures
from ..verdicts.engine import (
    CANNOT_TELL,
    MEASURES,
    NOT_MEASURED,
    NOT_REPRODUCED,
    NOT_RUN,
    PARTLY,
    REPRODUCED,
    VERDICT_MEANINGS,
    MissingResults,
    Results,
    few_words,
    judge,
    results_folder,
)
from .card import CLAIMS
from .card_html import COLOURS

BEYOND = "Beyond the paper"
# the claims the answer opens with: the paper's abstract in four findings (one head, one layer,
# pruning, when unimportant heads appear)
_HEADLINES = (
    "most_negligible",
    "most_layers_one_head",
    "prunable_translation",
    "prunable_classifier",
    "enc_dec_most_sensitive",
    "late_survives",
)
_SHORT = {m.name: m.key for m in measures.MEASURES}


def part_of(section: str) -> str:
    """The part of the book a claim belongs to: its paper section (``§3.2``, ``App. B``) or
    ``BEYOND`` for the claims no earlier work states this way."""
    return BEYOND if section.startswith(BEYOND) else section.split(",")[0]


def verdict_grid(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """One row per claim and measure: key, part, claim, chapter, measure (``_SHORT``), verdict (the
    claim's one answer, on every seed's evidence together) and ``seeds differ`` (True where the
    between-seed test finds the seeds' numbers apart). Measures a claim's chapter does not
    measure are left out."""
    folder = results_folder(profile, results_root)
    rows = []
    for c in CLAIMS:
        for measure, name in MEASURES.items():
            answer = judge(c, folder, measure)[-1]
            if answer["verdict"] == NOT_MEASURED:
                continue
            rows.append(
                {
                    "key": c.key,
                    "part": part_of(c.section),
                    "claim": c.claim,
                    "chapter": c.chapter,
                    "measure": _SHORT[name],
                    "verdict": answer["verdict"],
                    "seeds differ": str(answer.get("seeds differ", "")).startswith("yes"),
                }
            )
    return pd.DataFrame(rows, columns=["key", "part", "claim", "chapter", "measure", "verdict", "seeds differ"])


_DIFFER_MARK = "†"  # beside a verdict whose seeds differ beyond sampling noise


def _cell(verdict: str, differ: bool = False) -> str:
    mark = f' <span title="the seeds differ beyond sampling noise">{_DIFFER_MARK}</span>' if differ else ""
    return f'<td style="background-color: {COLOURS.get(verdict, "#ffffff")}">{escape(verdict)}{mark}</td>'


def grid_html(grid: pd.DataFrame) -> str:
    """The verdict grid as an HTML table: a row per claim, grouped by part (each claim linking to
    its chapter's page), a column per measure, each cell coloured by the claim's one answer and
    naming it (``_DIFFER_MARK`` where the seeds differ); under it, a legend of what each verdict means."""
    shown = [m.key for m in measures.MEASURES if (grid["measure"] == m.key).any()]
    cells = grid.set_index(["key", "measure"])
    head = "".join(f"<th>{escape(m)}</th>" for m in shown)
    body = []
    for part, rows in grid.drop_duplicates("key").groupby("part", sort=False):
        body.append(f'<tr class="part"><th colspan="{len(shown) + 1}">{escape(part)}</th></tr>')
        for row in rows.itertuples():
            tds = [
                _cell(cells.loc[(row.key, m), "verdict"], bool(cells.loc[(row.key, m), "seeds differ"]))
                if (row.key, m) in cells.index
                else "<td></td>"
                for m in shown
            ]
            link = f'<a href="{escape(row.chapter)}.html">{escape(row.claim)}</a>'
            body.append(f'<tr><td class="claim">{link}</td>{"".join(tds)}</tr>')
    legend = [
        f'<li><span style="background-color: {COLOURS[v]}; padding: 0 0.4em">{escape(v)}</span>: {escape(m)}</li>'
        for v, m in VERDICT_MEANINGS.items()
    ]
    if (grid["verdict"] == NOT_RUN).any():
        legend.append(f"<li>{escape(NOT_RUN)}: this profile has not run the claim's chapter.</li>")
    if grid["seeds differ"].any():
        legend.append(
            f"<li>{_DIFFER_MARK}: the seeds' numbers differ beyond sampling noise (the scorecard says on what)</li>"
        )
    return (
        f'<table class="verdict-grid"><thead><tr><th>claim (its chapter)</th>{head}</tr></thead>'
        f'<tbody>{"".join(body)}</tbody></table><ul class="verdict-legend">{"".join(legend)}</ul>'
    )


def _has_run(card: pd.DataFrame) -> bool:
    return bool((card["verdict"] != NOT_RUN).any())


def answer(card: pd.DataFrame) -> str:
    """Our answer, from the scorecard ``card``: a first paragraph in plain words with no count (what
    to believe about the paper's claims on these models, per measure, and about the chapters beyond
    the paper), then the counts behind it (``believe``), then the headline claims, each its one
    answer in a few words."""
    if not _has_run(card):
        return (
            f"**No chapter has run on the {card['profile'].iloc[0]} profile yet**, so this page has no answer to "
            "give: build the book (`make book`) and it will open with one."
        )
    paper = card[~card["section"].str.startswith(BEYOND)]
    beyond_paper = card[card["section"].str.startswith(BEYOND)]
    parts = [
        (paper, "verdict", "On the paper's own metric (BLEU, accuracy)", "the paper's claims tested here"),
        (paper, "likelihood verdict", "On the likelihood of the same outputs", "the paper's claims tested here"),
        (beyond_paper, "verdict", "Beyond the paper", "the claims the later chapters test"),
    ]
    plain = " ".join(f"{measure}, {_lead(claims, column)}." for claims, column, measure, _ in parts)
    counts = " ".join(believe(claims, column, measure, of=of) for claims, column, measure, of in parts)
    lines = [f"**Our answer, on the {card['profile'].iloc[0]} profile.** {plain}", "", f"**The count.** {counts}"]
    by_key = card.set_index("key")
    for key in _HEADLINES:
        row = by_key.loc[key]
        likely = row["likelihood verdict"]
        lines.append(
            f"* *{row['claim']}*: **{row['verdict']}**"
            + (f" (likelihood: **{likely}**)" if likely not in (NOT_MEASURED, NOT_RUN) else "")
            + f"; ours {row['ours']}; the paper {row['paper']}."
        )
    return "\n".join(lines[:3] + [""] + lines[3:])


def _judged(claims: pd.DataFrame, column: str) -> pd.DataFrame:
    return claims[~claims[column].isin([NOT_MEASURED, NOT_RUN])]


def _lead(claims: pd.DataFrame, column: str) -> str:
    """What a reader should take from ``claims``' one answers in ``column``, with no number: the
    findings hold (two thirds reproduced whole, none refuted), mostly hold wholly or in part,
    mostly do not, or cannot be settled here."""
    judged = _judged(claims, column)
    if judged.empty:
        return "nothing has been judged yet"
    count = judged[column].value_counts()
    held, part, refuted, open_ = (int(count.get(v, 0)) for v in (REPRODUCED, PARTLY, NOT_REPRODUCED, CANNOT_TELL))
    if refuted == 0 and held >= 2 * len(judged) / 3:
        return "the findings hold on these models"
    if held + part > refuted + open_:
        return "most of the findings hold on these models, many of them only in part"
    if refuted > held + part:
        return "most of the findings do not hold on these models"
    return "these models cannot settle most of the findings"


def believe(claims: pd.DataFrame, column: str, measure: str, of: str = "the paper's claims tested here") -> str:
    """One sentence on ``claims``' one answers in ``column``: what a reader should take from them
    (``_lead``), then how many hold, hold in part, do not (named) and cannot be decided on this data."""
    judged = _judged(claims, column)
    if judged.empty:
        return f"{measure}, nothing has been judged yet."
    count = judged[column].value_counts()
    held, part, refuted, open_ = (int(count.get(v, 0)) for v in (REPRODUCED, PARTLY, NOT_REPRODUCED, CANNOT_TELL))
    names = list(judged.loc[judged[column] == NOT_REPRODUCED, "claim"])
    shown = "; ".join(f"*{c}*" for c in names[:3]) + ("; and more" if len(names) > 3 else "")
    return (
        f"{measure}, {_lead(claims, column)}: of {of} ({len(judged)}), {held} {_verb(held, 'hold')}, {part} "
        f"{_verb(part, 'hold')} in part, {refuted} {_verb(refuted, 'do')} not and {open_} cannot be decided on "
        "this data." + (f" Not reproduced: {shown}." if names else "")
    )


def _verb(count: int, verb: str) -> str:
    """``verb`` agreeing with ``count`` claims: "1 holds", "2 hold", "1 does not"."""
    return verb if count != 1 else {"do": "does"}.get(verb, verb + "s")


def language_model_line(profile: str, results_root: Path | None = None) -> str:
    """Chapter 11 in one sentence, from its tables: the query heads whose masking alone changes
    the perplexity significantly (beside chance) and the share prunable by importance within 1%
    and 10% of the perplexity, by query head and by KV group; "" before it has run."""
    tables = Results(results_folder(profile, results_root))
    try:
        counts, shares, verses = (
            tables["11_one_head_counts"].iloc[0],
            tables["11_prunable_shares"].set_index(["unit", "order"]),
            int(tables["11_sets"]["verses"].min()),
        )
    except MissingResults:
        return ""
    pruned = " ".join(
        f"Pruned by importance, by {unit}, {shares.loc[(unit, 'importance'), 'prunable within 1%']:.0%} can go "
        f"within 1% of the perplexity and {shares.loc[(unit, 'importance'), 'prunable within 10%']:.0%} within 10%."
        for unit in dict.fromkeys(shares.index.get_level_values("unit"))
    )
    level = counts.get("level", math.nan)
    tested = (
        " These verses are too few for the test to call any head significant (a calibrated level of 0)."
        if level == 0
        else f" The test is at the calibrated p < {level:.3g}."
        if level == level
        else ""
    )
    if verses < MIN_UNITS:
        tested += (
            f" These counts rest on {verses} verses, under the book's minimum of {MIN_UNITS}: this run cannot decide "
            "which heads matter."
        )
    return (
        f"* *Chapter 11, the paper's questions asked of a current language model*: masking one query head alone "
        "changes the perplexity significantly for "
        f"{int(counts['significantly worse']) + int(counts['significantly better'])} "
        f"of {int(counts['heads'])} heads ({counts['expected by chance']:.1f} expected by chance).{tested} {pruned}"
    )


def memory_line(profile: str, results_root: Path | None = None) -> str:
    """Chapter 14 in one sentence, from its tables: at half and at a quarter of the KV-cache
    bytes, the method that keeps perplexity best where the budget table calls it clear (its gap
    to the runner-up above the fast passes' tolerance, the interval above 0; else that none is),
    and what removing KV groups costs there; "" before it has run."""
    tables = Results(results_folder(profile, results_root))
    try:
        budgets, points = tables["14_budgets"].set_index("budget"), tables["14_points"]
    except MissingResults:
        return ""
    parts = []
    for budget in CLAIMED_BUDGETS:
        if budget not in budgets.index:
            continue
        row = budgets.loc[budget]
        best = points[(points["method"] == row["best"]) & (points["setting"] == row["best setting"])].iloc[0]
        removed = points[(points["method"] == REMOVED) & (points["bytes share"] <= budget + FIT)]
        cost = (
            " Removing KV groups by importance to fit costs "
            f"x{removed.sort_values('bytes share')['perplexity ratio'].iloc[-1]:.2f}."
            if len(removed) and row["best"] != REMOVED
            else ""
        )
        lead = (
            f"the best way to spend them is {row['best']}"
            if row["clear"]
            else f"no way is clearly best: {row['best']} and {row['runner-up']} are within the interval or the "
            f"tolerance. The lowest is {row['best']}"
        )
        parts.append(
            f"At {budget:.0%} of the bytes {lead} ({row['best setting']}: perplexity x{best['perplexity ratio']:.2f} "
            f"of the full cache's).{cost}"
        )
    if not parts:
        return ""
    return (
        "* *Chapter 14, what a byte of KV cache is worth*: whole chapters read through each cache, each method at "
        "its configuration with the most bytes within the budget. " + " ".join(parts)
    )


def _served_line(profile: str, results_root: Path | None = None) -> str:
    """Chapter 14b in one sentence, from its frontier: the setups no other beats at the smallest
    context size, and whether a removal of KV groups is among them; "" before it has run."""
    tables = Results(results_folder(profile, results_root))
    try:
        table = tables["14b_frontier"]
    except MissingResults:
        return ""
    cells = table["cells"].min()
    best = table[(table["cells"] == cells) & table["unbeaten"].astype(bool)].sort_values("total MiB")
    named = "".join(
        f"\n  * {r['setup']}: {r['total MiB']:,.0f} MiB, {r['perplexity change']:+.1%}" for _, r in best.iterrows()
    )
    removal = (
        "One with KV groups removed is among them."
        if best["family"].eq("removal").any()
        else "None of them removes KV groups."
    )
    return (
        f"* *Chapter 14b, served at equal memory in llama.cpp*: at {int(cells):,} cells, no other setup beats these "
        f"on weights plus cache. {removal}{named}"
    )


def beyond(card: pd.DataFrame, results_root: Path | None = None) -> str:
    """What the chapters beyond the paper found: chapter 11 in numbers, then each claim of
    chapters 12 and 13 with our numbers and its verdict."""
    rows = card[card["chapter"].str.startswith(("12_", "13_", "13b_", "14_", "14b_"))]
    if rows.empty or not _has_run(rows):
        return "The chapters beyond the paper have not run on this profile."
    lines = [
        f"* *{r['claim']}*: **{r['verdict']}**"
        + (
            f" (likelihood: **{r['likelihood verdict']}**)"
            if r["likelihood verdict"] not in (NOT_MEASURED, NOT_RUN)
            else ""
        )
        + f". Ours: {few_words(r['ours'])}."
        for _, r in rows.iterrows()
    ]
    own = rows[rows["section"].str.startswith(BEYOND)]
    held = int((own["verdict"] == REPRODUCED).sum())
    again = len(rows) - len(own)
    eleven = language_model_line(card["profile"].iloc[0], results_root)
    memory = memory_line(card["profile"].iloc[0], results_root)
    served = _served_line(card["profile"].iloc[0], results_root)
    return (
        f"Of the {len(own)} claims beyond the paper, {held} {'is' if held == 1 else 'are'} reproduced "
        "(on every seed's evidence together where a model has several)."
        + (f" The list also gives the {again} of the paper's claims that chapter 12 asks again." if again else "")
        + "\n\n"
        + "\n".join([x for x in (eleven, memory, served) if x] + lines)
    )


def _model_line(name: str, spec: dict) -> str:
    what = (
        spec.get("checkpoint")
        or spec.get("archive")
        or spec.get("encoder")
        or (
            "{layers}+{layers} layers x {heads} heads, trained here".format(**spec["train"]) if "train" in spec else ""
        )
    )
    data = spec.get("corpus") or ("generated" if spec.get("encoder") and "data" not in spec else "downloaded")
    seeds = len(spec.get("seeds", [0]))
    task = "" if spec.get("task") == name else f" ({spec.get('task')})"
    return f"{name}{task}: {what}, {data} data, {seeds} seed{'s' * (seeds > 1)}"


def profile_table() -> pd.DataFrame:
    """One row per profile under ``profiles/``: its description, the models its chapters 03-10
    study (from its ``models``) and the language model of chapters 11-13 (its ``language_model``)."""
    rows = []
    for path in sorted({p for folder in profile_folders() for p in folder.glob("*.yml")}, key=lambda p: p.stem):
        settings = load_profile(path.stem)
        lm = chapter_parameters(settings, "11_nine_heads")["language_model"]
        studied = [_model_line(n, s) for n, s in settings.models.items() if s.get("task")]
        rows.append(
            {
                "profile": settings.name,
                "description": settings.description,
                "models of chapters 02-10": "; ".join(studied),
                "language model of chapters 11-13": lm,
            }
        )
    return pd.DataFrame(rows)
