"""The engine that judges the paper's claims: the one place that turns a claim's rule and a run's
result tables into a verdict. The claims and their rules live with the chapter they judge
(``helpers/book/chapters/chNN_*.py``); ``helpers.book.scorecard`` gathers them all. This module knows no claim.

Every claim states the paper's value (with its section, table or figure), reads ours from the CSV
tables the chapters saved (results/<profile>/), and applies its rule, which gives one of
``VERDICTS``: ``reproduced``, ``partly``, ``cannot tell`` (the data lack the power to decide) or
``not reproduced``. A claim whose chapter has not run on the profile is ``not run``. Nothing here
is typed in by hand except the paper's side and the rules.

A rule's parameters that a chapter also has (chapter 09's ``min_base_share``) are the
chapter's: ``chapter_verdicts`` records the values the chapter ran with under
``results/<profile>/parameters/<chapter>.json``, and the scorecard reads them, so a chapter
rerun with ``-p min_base_share=0.05`` changes the chapter and the scorecard alike.

Where the chapters measured several training runs of a model (a ``training_seed`` column in
their tables), each claim is judged once on every seed's evidence together: ``check``
reads the tables of all those seeds at once (``Results.pooled``) and pools its statistic as the
claim reads it (``pooling``: units added over seeds, values averaged with an interval that holds
however the seeds' errors correlate), and its verdict is read from that pooled statistic and its
interval. Each seed is also checked on its own rows (the paper's rows, with no seed, go with every
seed), and its value and verdict stand beside the pooled answer (``each seed``). Whether the seeds
differ beyond sampling noise is a separate column (``seeds differ``, from ``Claim.seed_statistic``
and ``between_seeds``), which never changes the verdict. A seed is checked only where every model
in the tables the claim reads has a run with that seed (the ``seeds`` column lists those pooled).

Each claim is judged once per measure (``MEASURES``): on the paper's metric (BLEU, accuracy)
and, for the chapters that measured it, on the likelihood (``..._likelihood`` tables), by the
same rule unless the claim names one of its own (``likelihood_rule``); a claim whose chapter has
no likelihood tables is ``not measured`` there. A table's rows from the paper carry
``from_paper = True``.

    from helpers.book.verdicts.engine import chapter_verdicts
    from helpers.book.chapters.ch09_training_dynamics import CLAIMS
    chapter_verdicts("course", CLAIMS)  # each seed's row, then the pooled one
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from ...base.atomic import atomic_path
from ...heads.significance import MIN_UNITS
from ..store import measures
from ..store.results import MissingTable, read_table_file
from ..store.results import results_root as default_results_root

REPRODUCED, PARTLY, NOT_REPRODUCED, NOT_RUN = "reproduced", "partly", "not reproduced", "not run"
NOT_MEASURED = "not measured"  # the likelihood verdict of a claim whose chapter has no likelihood tables
LIKELIHOOD = measures.LIKELIHOOD.suffix  # the suffix of a chapter's likelihood tables
METRIC, LIKELIHOOD_NAME = measures.METRIC.name, measures.LIKELIHOOD.name
SAME_RULE = "the same rule"  # a claim judged on the likelihood by its rule on the paper's metric
MEASURES = {m.suffix: m.name for m in measures.MEASURES}  # table suffix -> the measure's one name
_FROM_PAPER = "from_paper"  # the column that marks a table's rows from the paper
CANNOT_TELL = "cannot tell"  # the data lack the power to decide: too few heads placed by the tests
VERDICTS = (REPRODUCED, PARTLY, CANNOT_TELL, NOT_REPRODUCED, NOT_RUN)
# what each verdict word means, defined once: the legend under every verdict table and on the front page
VERDICT_MEANINGS = {
    REPRODUCED: "the claim holds on our models, as its rule states it.",
    PARTLY: "part of it holds: for some models and not others, or the direction without the size.",
    CANNOT_TELL: "the data cannot decide: what we measured fits both the claim and its opposite.",
    NOT_REPRODUCED: "the claim fails on data that could have shown it.",
}
# how a rule "read over" an interval, or over the counts its undecided units allow, gives one
# verdict (``pooling.supported``); printed under every chapter's rules
READ_OVER = (
    "A rule read over an interval, or over every count the undecided units allow, gives the verdict "
    "it gives at every point of it; reproduced at some points and partly at the others is partly; "
    "any other mix is cannot tell, unless the rule names its own reading. The intervals hold the "
    "sampling noise of the examples, given these training seeds."
)
POOLED = "all"  # the training_seed of a claim's one answer, on every seed's evidence together
SEED = "training_seed"
IDENTITY_COLUMNS = ("model", "source", "track")  # the column that names the model of a row, by table
SHARE_TOLERANCE = 0.10  # "about 20% prunable" is met within 10 points of the share of heads


class MissingResults(LookupError):
    pass


class _SeedNotRun(LookupError):
    """A table has rows for other training seeds but none for this one (e.g. a model trained
    with fewer seeds than another)."""


class Results:
    """The CSV tables of one profile, read on demand: ``results["06_prunable_shares"]``; with a
    ``training_seed``, the rows of that seed (and rows without a seed, such as the paper's); with a
    tuple of seeds (``pooled``), the rows of every one of them."""

    def __init__(
        self,
        folder: Path,
        training_seed: int | tuple[int, ...] | None = None,
        measure: str = "",
        params: dict[str, Any] | None = None,
    ):
        self.folder = Path(folder)
        self.training_seed = training_seed
        self.measure = measure  # "" (the paper's metric) or LIKELIHOOD: the suffix of the tables read
        self.params = dict(params or {})  # the rule's parameters, as the claim's chapter ran with them
        self.read: set[str] = set()  # the tables read through these results and those derived from them

    @property
    def seeds(self) -> tuple[int, ...]:
        """The training seeds these results read: none, one, or the pooled ones."""
        if self.training_seed is None:
            return ()
        return self.training_seed if isinstance(self.training_seed, tuple) else (self.training_seed,)

    def __getitem__(self, name: str) -> pd.DataFrame:
        path = self.folder / f"{name}{self.measure}.csv"
        try:
            table = read_table_file(path)
        except MissingTable:
            raise MissingResults(name) from None
        self.read.add(path.name)
        if self.training_seed is None or SEED not in table:
            return table
        seeded = table[SEED].notna()
        kept = ~seeded
        model = next((c for c in IDENTITY_COLUMNS if c in table), None)
        for seed in self.seeds:
            mine = table[SEED] == seed
            if seeded.any() and not mine.any():
                raise _SeedNotRun(name)
            # a seed counts only where it has every model the table has (e.g. a classifier's third
            # seed, in a table that also holds a translation model trained with two seeds, does not)
            if model and set(table.loc[seeded, model]) - set(table.loc[mine, model]):
                raise _SeedNotRun(name)
            kept |= mine
        return table[kept].reset_index(drop=True)

    def training_seeds(self, files: set[str] | None = None) -> list[int]:
        """Every training seed found in the profile's tables (only ``files``, when given), in order."""
        seeds: set[int] = set()
        for path in sorted(self.folder.glob("*.csv")):
            if files is not None and path.name not in files:
                continue
            if SEED in read_table_file(path, nrows=0).columns:
                seeds.update(int(s) for s in read_table_file(path, usecols=[SEED])[SEED].dropna().unique())
        return sorted(seeds)

    def for_seed(self, training_seed: int) -> Results:
        return self._derived(training_seed)

    def pooled(self, seeds: Sequence[int]) -> Results:
        """These results on every one of ``seeds`` at once: a table's rows of each of them."""
        return self._derived(tuple(int(s) for s in seeds))

    def _derived(self, training_seed: int | tuple[int, ...]) -> Results:
        derived = Results(self.folder, training_seed, self.measure, self.params)
        derived.read = self.read  # one record of the tables read
        return derived


_Check = Callable[[Results], tuple[str, str]]  # -> (ours, verdict)


@dataclass(frozen=True)
class Claim:
    key: str  # a short name, e.g. "few_significant"
    section: str
    claim: str
    paper: str
    # the rule, once: every condition that decides each verdict it gives, as "reproduced: ...;
    # partly: ...; cannot tell: ..." (``rule_text`` prints it above the chapter's verdict table and
    # in the scorecard); ``{name}`` fields are the rule's parameters as the chapter ran (``parameters``)
    rule: str
    chapter: str
    check: _Check
    # on the likelihood tables: True: ``check`` itself; a function: its own check (and
    # ``likelihood_rule``); False: the chapter does not measure the likelihood
    likelihood: bool | _Check = False
    likelihood_rule: str = SAME_RULE
    # the rule's parameters that are also the chapter's, with the chapter's defaults (a test
    # keeps them equal to the notebook's parameters cell)
    parameters: dict[str, Any] = field(default_factory=dict)
    # what ``check`` reads when it is not the paper's metric (claims beyond the paper): the
    # chapters' verdict lines and tables name it instead of "the paper's metric"
    measured_on: str = ""
    # what the verdict rests on, read from the same tables (``samples``): the units, the
    # resolution, the smallest effect its test detects; the scorecard shows it beside the verdict
    sample: Callable[[Results], str] | None = None
    # the claim's own statistic per seed, with its sampling error (``between_seeds``): whether the
    # seeds' numbers differ beyond sampling noise (the ``seeds differ`` column; never the verdict)
    seed_statistic: Callable[[Results], dict[str, Any]] | None = None
    # the units the claim's tests resample and their name, ``(n, "texts")``, read from the same
    # tables: on fewer than ``MIN_UNITS`` a verdict decides nothing, so the claim is ``cannot tell``
    # with that reason (a profile lowers a chapter's ``min_units`` to run its code: smoke, lab)
    units: Callable[[Results], tuple[int, str]] | None = None

    def shown_measure(self, measure: str) -> str:
        """How a verdict line names ``measure`` (one of ``MEASURES``' names): a claim beyond the
        paper is judged on what its check reads (``measured_on``), not on "the paper's metric"."""
        return self.measured_on if measure == METRIC and self.measured_on else measure


# ---- what rules share -------------------------------------------------------------------------
def ours(table: pd.DataFrame) -> pd.DataFrame:
    """Our rows of a table that also holds the paper's (``from_paper`` True on the paper's rows)."""
    if _FROM_PAPER not in table:
        return table
    return table[~table[_FROM_PAPER].fillna(False).astype(bool)]


def present(rows: pd.DataFrame, what: str) -> pd.DataFrame:
    """``rows``, or ``_SeedNotRun`` when there are none: the seed has no run of that model."""
    if rows.empty:
        raise _SeedNotRun(what)
    return rows


def three_way(full: bool, some: bool) -> str:
    return REPRODUCED if full else PARTLY if some else NOT_REPRODUCED


def within(ours: float, paper: float, tolerance: float = SHARE_TOLERANCE) -> bool:
    return abs(ours - paper) <= tolerance + 1e-9


def by_model(holds: pd.Series, undecided: pd.Series) -> str:
    """A claim checked model by model: reproduced when it holds for every model, partly for some;
    where it holds for none, ``cannot tell`` if the tests left some model undecided, else not
    reproduced."""
    if holds.any():
        return three_way(holds.all(), True)
    return CANNOT_TELL if undecided.any() else NOT_REPRODUCED


def for_every(verdicts: Sequence[str]) -> str:
    """A claim made for every model (or kind), from each one's own verdict: reproduced when every
    one reproduces it, partly when some do (or some partly); where none supports it, ``cannot
    tell`` if some cannot tell, else not reproduced (as ``by_model``, with verdicts read over
    intervals)."""
    found = list(verdicts)
    if not found:
        raise ValueError("no verdicts to combine")
    if all(v == REPRODUCED for v in found):
        return REPRODUCED
    if any(v in (REPRODUCED, PARTLY) for v in found):
        return PARTLY
    return CANNOT_TELL if CANNOT_TELL in found else NOT_REPRODUCED


# ---- judging ----------------------------------------------------------------------------------
def results_folder(profile: str, results_root: Path | None = None) -> Path:
    return Path(results_root or default_results_root()) / profile


def _parameters_file(folder: Path, chapter: str) -> Path:
    return folder / "parameters" / f"{chapter}.json"


def _record_parameters(folder: Path, claims: Sequence[Claim], params: dict[str, Any]) -> None:
    """Keep the rule parameters the claims' chapter ran with, for the scorecard to judge its
    claims alike; a parameter that none of ``claims`` reads is refused (a typo would change nothing)."""
    known = {name for c in claims for name in c.parameters}
    unknown = set(params) - known
    if unknown:
        raise ValueError(
            f"no claim of chapter {claims[0].chapter} reads the parameter(s) {sorted(unknown)}; "
            f"its claims read {sorted(known) or 'none'}"
        )
    path = _parameters_file(folder, claims[0].chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(params, sort_keys=True))


def _claim_parameters(claim: Claim, folder: Path) -> dict[str, Any]:
    """The claim's rule parameters: the values its chapter last recorded, else the defaults."""
    path = _parameters_file(folder, claim.chapter)
    recorded = json.loads(path.read_text()) if path.exists() else {}
    return {name: recorded.get(name, default) for name, default in claim.parameters.items()}


def judge(claim: Claim, folder: Path, measure: str = "") -> list[dict[str, Any]]:
    """The claim's verdicts on one measure (a ``MEASURES`` key): one row per training seed
    checked on its own (``training_seed`` None where the tables have no seeds), then the claim's
    one answer (``training_seed`` ``POOLED``): ``check`` on every seed's rows at once, with
    ``seeds`` (those pooled), ``each seed`` (each seed's value and verdict) and ``seeds differ``
    (the between-seed test in words; "" with one seed). Each row: key, measure, shown measure,
    training_seed, ours, verdict, rule."""
    base = {"key": claim.key, "measure": MEASURES[measure], "shown measure": claim.shown_measure(MEASURES[measure])}
    answer = {"training_seed": POOLED, "seeds": "", "each seed": "", "seeds differ": ""}
    if measure and not claim.likelihood:
        return [{**base, **answer, "ours": "", "verdict": NOT_MEASURED, "rule": ""}]
    check = claim.check if not measure or claim.likelihood is True else claim.likelihood
    check = _with_enough_units(check, claim.units)
    params = _claim_parameters(claim, folder)
    rule = (claim.rule if not measure else claim.likelihood_rule).format(**params)
    results = Results(folder, measure=measure, params=params)
    try:
        found = per_seed(claim.chapter, check, results)
        seeds = [s for s in found if s is not None]
        text, verdict = check(results.pooled(seeds)) if len(seeds) > 1 else next(iter(found.values()))
    except MissingResults as missing:
        why = f"({missing.args[0]}{measure}.csv not found: run {claim.chapter})"
        return [{**base, **answer, "verdict": NOT_RUN, "rule": rule, "ours": why}]
    except KeyError as missing:  # a table written by an older version of the chapter
        why = f"(no {missing.args[0]!r} in the results: rerun {claim.chapter})"
        return [{**base, **answer, "verdict": NOT_RUN, "rule": rule, "ours": why}]
    rows = [
        {**base, "training_seed": seed, "ours": seed_text, "verdict": seed_verdict, "rule": rule}
        for seed, (seed_text, seed_verdict) in found.items()
    ]
    if len(seeds) > 1 and len({t for t, _ in found.values()}) > 1:  # seeds with one text have nothing to tell apart
        answer = {
            "training_seed": POOLED,
            "seeds": ", ".join(str(s) for s in seeds),
            "each seed": "; ".join(f"seed {s}: {t} ({v})" for s, (t, v) in found.items()),
            "seeds differ": _seed_difference(claim, results, seeds),
        }
    else:
        answer = {**answer, "seeds": ", ".join(str(s) for s in seeds)}
    rows.append({**base, **answer, "ours": text, "verdict": verdict, "rule": rule})
    return rows


def _with_enough_units(check: _Check, units: Callable[[Results], tuple[int, str]] | None) -> _Check:
    """``check``, its verdict ``cannot tell`` where the tables hold fewer than ``MIN_UNITS`` of the
    claim's ``units``, the reason first in its text (``few_words`` shows it); ``check`` itself where
    the claim names no units or the tables do not record them."""
    if units is None:
        return check

    def judged(results: Results) -> tuple[str, str]:
        text, verdict = check(results)
        try:
            n, unit = units(results)
        except (MissingResults, KeyError):
            return text, verdict
        if n >= MIN_UNITS:
            return text, verdict
        return f"n = {n} {unit}, under the book's minimum of {MIN_UNITS}: no finding; {text}", CANNOT_TELL

    return judged


def _seed_difference(claim: Claim, results: Results, seeds: Sequence[int]) -> str:
    """Whether the seeds' numbers on ``claim`` differ beyond sampling noise, on the claim's own
    statistic (``between_seeds.seeds_differ``), in words that start "yes", "no" or "not tested".
    It stands beside the pooled verdict and never changes it."""
    from .between_seeds import NotTestable, seeds_differ

    if claim.seed_statistic is None:
        return "not tested (the tables hold no sampling error for this claim's statistic)"
    try:
        test = seeds_differ({seed: claim.seed_statistic(results.for_seed(seed)) for seed in seeds})
    except NotTestable as why:
        return f"not tested ({why})"
    except LookupError as missing:  # a table or a column of an older run
        return f"not tested ({missing} not in the results)"
    if test is None:
        return "not tested (nothing varies to test)"
    return test.text()


def per_seed(chapter: str, check: _Check, results: Results) -> dict[int | None, tuple[str, str]]:
    """``{training seed: (ours, verdict)}``: ``check`` on each seed's rows (``{None: ...}`` where
    the tables it reads have no seeds, though other chapters' tables do: SmolLM2 has no training
    seed); ``MissingResults`` naming ``chapter`` where no seed has every model."""
    seeds = results.training_seeds()
    if not seeds:
        try:
            return {None: check(results)}
        except _SeedNotRun as missing:
            raise MissingResults(missing.args[0]) from None
    found: dict[int | None, tuple[str, str]] = {}
    for seed in seeds:
        try:
            found[seed] = check(results.for_seed(seed))
        except _SeedNotRun:
            continue
    if not found:
        raise MissingResults(f"{chapter} (no training seed)")
    if not results.training_seeds(results.read):  # the claim's own tables have no seeds (SmolLM2's)
        return {None: next(iter(found.values()))}
    return found


def sample_of(claim: Claim, folder: Path, measure: str = "") -> str:
    """What the claim's verdict on ``measure`` rests on (``Claim.sample``), "" where the claim
    names none or its tables lack what it reads (a run from before they were recorded)."""
    if claim.sample is None:
        return ""
    try:
        return claim.sample(Results(folder, measure=measure, params=_claim_parameters(claim, folder)))
    except (MissingResults, KeyError):
        return ""


def chapter_verdicts(
    profile: str, claims: Sequence[Claim], results_root: Path | None = None, **params: Any
) -> pd.DataFrame:
    """The verdicts on ``claims`` (one chapter's) that the scorecard gives, one row per claim,
    measure and training seed checked alone, and the claim's one answer per measure
    (``training_seed`` ``POOLED``). ``params``: the rule parameters the chapter ran with (recorded
    for the scorecard). Columns: key, claim, measure, shown measure, training_seed, ours, verdict,
    rule, then on the answer's rows seeds, each seed, seeds differ; profile."""
    if not claims:
        raise ValueError("no claims to judge")
    folder = results_folder(profile, results_root)
    if params:
        _record_parameters(folder, claims, params)
    rows = [{"claim": c.claim, **row} for c in claims for measure in MEASURES for row in judge(c, folder, measure)]
    table = pd.DataFrame(rows).assign(profile=profile)
    columns = ["key", "claim", "measure", "shown measure", "training_seed", "ours", "verdict", "rule"]
    return table[[*columns, "seeds", "each seed", "seeds differ", "profile"]]


# ---- showing verdicts -------------------------------------------------------------------------
def verdict_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """``chapter_verdicts`` laid out to read: one row per claim and measure, the claim's one answer
    (``ours`` on every seed pooled, ``verdict``), then each seed's value and verdict and whether
    the seeds differ (both left out where no claim has several seeds)."""
    answers = verdicts[(verdicts["verdict"] != NOT_MEASURED) & (verdicts["training_seed"] == POOLED)]
    columns = ["ours", "verdict"] + [
        c for c in ("seeds", "each seed", "seeds differ") if answers[c].fillna("").ne("").any()
    ]
    table = answers.set_index(["claim", "shown measure"])[columns].rename_axis(["claim", "measure"])
    if "profile" in verdicts:  # the verdicts are those of one profile's run: its name heads the table
        table.columns.name = f"{verdicts['profile'].iloc[0]} profile"
    return table


def whole(table: pd.DataFrame):
    """``table`` to display with every cell whole (pandas cuts text at 50 characters) and long
    text wrapped: the evidence a verdict rests on stays readable where the verdict is."""
    return table.style.set_properties(**{"white-space": "normal", "text-align": "left"})


def verdict_of(verdicts: pd.DataFrame, key: str, measure: str = METRIC) -> str:
    """The one answer (pooled verdict) of claim ``key`` on ``measure`` (its one name) in ``chapter_verdicts``."""
    row = verdicts[(verdicts["key"] == key) & (verdicts["measure"] == measure) & (verdicts["training_seed"] == POOLED)]
    if row.empty:
        raise KeyError(f"no verdict on claim {key!r} for {measure!r}")
    return str(row["verdict"].iloc[0])


def few_words(text: str, limit: int = 90) -> str:
    """A claim's pooled value in a few words: its first clause, cut at ``limit`` characters (the
    scorecard, a click away, has it whole)."""
    first = str(text).split("; ")[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _folded(ours: str) -> str:
    """A verdict table's *ours* cell as HTML: its first words, the whole text one click away."""
    short = few_words(ours)
    if short == ours:
        return escape(ours)
    return f"{escape(short)}<details><summary>all of it</summary>{escape(ours)}</details>"


def rule_text(claim: Claim, params: dict[str, Any] | None = None) -> str:
    """``claim``'s rule as the page prints it: its ``{name}`` fields filled with ``params`` (the
    rule's parameters as its chapter ran; the claim's defaults for any left out), one sentence per
    verdict it names, and the likelihood's own rule after it where the claim has one."""
    if not claim.rule:
        raise ValueError(f"claim {claim.key!r} has no rule: state every condition that decides its verdicts")
    values = {**claim.parameters, **(params or {})}
    text = _sentences(claim.rule.format(**values))
    if claim.units is not None:  # ``_with_enough_units``: no verdict on too few resampled units
        text += f" Cannot tell: fewer than {MIN_UNITS} units resampled (the sample column names them)."
    if claim.likelihood and claim.likelihood_rule != SAME_RULE:
        text += f" On {LIKELIHOOD_NAME}: " + _sentences(claim.likelihood_rule.format(**values))
    return text


def _sentences(rule: str) -> str:
    """``rule``'s clauses (separated by ``;`` outside brackets) as sentences: ``reproduced: a;
    partly: b`` reads ``Reproduced: a. Partly: b.``"""
    clauses, depth, start = [], 0, 0
    for i, ch in enumerate(rule):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth == 0:
            clauses.append(rule[start:i])
            start = i + 1
    clauses.append(rule[start:])
    return " ".join(c.strip()[:1].upper() + c.strip()[1:].rstrip(".") + "." for c in clauses if c.strip())


def legend_html() -> str:
    """The four verdict words, one line each (``VERDICT_MEANINGS``): the legend under a verdict table."""
    lines = "".join(f"<li><b>{escape(v)}</b>: {escape(m)}</li>" for v, m in VERDICT_MEANINGS.items())
    return f'<ul class="verdict-legend">{lines}</ul>'


@dataclass(frozen=True)
class VerdictDisplay:
    """A chapter's verdicts as a page shows them: each claim's rule above the table
    (``sentences``: claim -> ``rule_text``), the table (``verdict_table``), the legend under it."""

    sentences: dict[str, str]
    table: pd.DataFrame

    def _repr_html_(self) -> str:
        rules = "".join(f"<li><b>{escape(c)}</b>. {escape(s)}</li>" for c, s in self.sentences.items())
        return (
            f'<p class="verdict-rules-head">The rules:</p><ul class="verdict-rules">{rules}</ul>'
            f'<p class="verdict-rules-reading">{escape(READ_OVER)}</p>'
            f"{whole(self.table.assign(ours=self.table['ours'].map(_folded))).to_html()}"
            f"<p>What the verdicts mean:</p>{legend_html()}"
        )

    def __repr__(self) -> str:
        rules = "\n".join(f"{c}. {s}" for c, s in self.sentences.items())
        legend = "\n".join(f"{v}: {m}" for v, m in VERDICT_MEANINGS.items())
        return f"{rules}\n{READ_OVER}\n\n{self.table.to_string()}\n\n{legend}"


def show_verdicts(profile: str, claims: Sequence[Claim], results_root: Path | None = None, **params: Any):
    """A chapter's verdicts as it shows them (``VerdictDisplay``): each claim's rule with every
    condition that decides it (``rule_text``), ``chapter_verdicts`` laid out by ``verdict_table``
    with every cell whole, and the legend of the verdict words. ``params``: the rule parameters
    the chapter ran with."""
    verdicts = chapter_verdicts(profile, claims, results_root, **params)
    folder = results_folder(profile, results_root)
    sentences = {c.claim: rule_text(c, _claim_parameters(c, folder)) for c in claims}
    return VerdictDisplay(sentences, verdict_table(verdicts))
