"""The teaching guide's key: the answer to each exercise that asks for a prediction first, as the
profile measured it (the lab's, for a class).

Each ``Prediction`` names an exercise of the guide by its chapter and override, and reads its
answer from two results folders: the profile's own run (``base``) and the run with the override
(``run``, made by ``helpers.book.running.teacher_key``). The guide shows the key folded, from the
table ``17_teacher_key`` that command saves; a test holds every "Predict" of the guide to one
entry here and back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..store import measures
from ..store.results import read_table_file

KEY_TABLE = "17_teacher_key"


@dataclass(frozen=True)
class Prediction:
    """One exercise (``chapter`` run with ``override``, ``name=value`` as the guide writes it) and
    ``answer(base, run)``: the numbers that answer it, in words, from the two results folders."""

    chapter: str
    override: str
    answer: Callable[[Path, Path], str]

    @property
    def slug(self) -> str:
        """A folder name for the run: chapter number and parameter."""
        return f"{self.chapter.split('_', 1)[0]}-{self.override.split('=', 1)[0]}"


def _ranking(base: Path, run: Path) -> str:
    from scipy.stats import spearmanr

    both = read_table_file(base / "01_importance.csv").merge(
        read_table_file(run / "01_importance.csv"), on=["layer", "head"], suffixes=("", "_run")
    )
    rho = spearmanr(both["importance"], both["importance_run"]).statistic

    def top(column: str) -> set:
        return set(map(tuple, both.nlargest(5, column)[["layer", "head"]].to_numpy()))

    kept = len(top("importance") & top("importance_run"))
    return f"Spearman's rho between the two rankings of I_h: {rho:.2f}; {kept} of the top 5 heads stay in the top 5"


def _significant(folder: Path, suffix: str = "") -> pd.Series:
    """``(model, seed) -> "k of n"``: heads significant alone in chapter 03's counts, one count
    per model and training seed (summed over the attention kinds)."""
    counts = read_table_file(folder / f"03_one_head_counts{suffix}.csv")
    counts = counts[~counts.get("from_paper", False)].fillna({"training_seed": 0})
    per_run = counts.groupby(["model", "training_seed"])[["significant", "heads"]].sum()
    return per_run.apply(lambda r: f"{int(r['significant'])} of {int(r['heads'])}", axis=1)


def _named(index: tuple) -> str:
    model, seed = index
    return f"{model} (seed {seed:g})"


def _significant_at(base: Path, run: Path) -> str:
    mine, lab = _significant(run), _significant(base)
    return "; ".join(f"{_named(i)}: {mine[i]} heads significant (at the lab's level: {lab[i]})" for i in mine.index)


def _power(base: Path, run: Path) -> str:
    parts = []
    for suffix, measure in ((m.suffix, "its metric" if m is measures.METRIC else m.name) for m in measures.MEASURES):
        mine, lab = _significant(run, suffix), _significant(base, suffix)
        parts += [f"{_named(i)} on {measure}: {mine[i]} (all examples: {lab[i]})" for i in mine.index]
    return "; ".join(parts)


def _reestimated(base: Path, run: Path) -> str:
    shares = read_table_file(run / "06_prunable_shares.csv")
    table = shares.pivot_table(index=["model", "training_seed"], columns="order", values="prunable_share")
    if "re-estimated" not in table:
        return "this run drew no re-estimated curve"
    return "; ".join(
        f"{model} (seed {seed:g}): re-estimated {r['re-estimated']:.0%}, estimated once {r['importance']:.0%}"
        for (model, seed), r in table.iterrows()
    )


def _random_verdict(base: Path, run: Path) -> str:
    from ..verdicts.engine import POOLED, judge
    from .ch06_pruning_curves import CLAIMS

    claim = next(c for c in CLAIMS if c.key == "importance_beats_random")

    def verdict(folder: Path) -> str:
        return next(r["verdict"] for r in judge(claim, folder) if r["training_seed"] == POOLED)

    return f"with the run's random orders: {verdict(run)}; with the lab's: {verdict(base)}"


def _looks_and_families(base: Path, run: Path) -> str:
    """Section 3's rows (each test's false-positive rate against chance) and section 6's (a
    family of heads with a false gain, uncorrected and corrected), at both levels."""
    parts = []
    for folder, label in ((run, "at the new alpha"), (base, "at the lab's")):
        looks = read_table_file(folder / "15a_looks.csv")
        families = read_table_file(folder / "15a_many_heads.csv")
        rows = [f"{r.test} flags {r.flags:.1%} (chance {r.chance:.1%})" for r in looks.itertuples()]
        rows += [f"{r.iloc[0]}: {r.iloc[1]:.1%} of families with a false gain" for _, r in families.iterrows()]
        parts.append(f"{label}: " + ", ".join(rows))
    return "; ".join(parts)


def _q4_cache(base: Path, run: Path) -> str:
    def change(folder: Path) -> float:
        quality = read_table_file(folder / "14b_quality.csv")
        return float(quality.loc[quality["setup"] == "q4_0 cache", "perplexity change"].iloc[0])

    return f"a q4_0 cache: {change(run):+.1%} perplexity on the longer texts, {change(base):+.1%} on the lab's"


PREDICTIONS = [
    Prediction("01_gates_and_pruning", "n_pairs=16", _ranking),
    Prediction("03_ablating_one_head", "alpha=0.05", _significant_at),
    Prediction("03_ablating_one_head", "max_examples=100", _power),
    Prediction("06_pruning_curves", "reestimate=true", _reestimated),
    Prediction("06_pruning_curves", "random_orders=5", _random_verdict),
    Prediction("14b_served_at_equal_memory", "text_tokens=512", _q4_cache),
    Prediction("15a_how_sure_we_are", "alpha=0.05", _looks_and_families),
]


def key_table(base: Path, runs: Path, failed: frozenset[str] = frozenset()) -> pd.DataFrame:
    """One row per ``PREDICTIONS`` entry: exercise (chapter and override) and answer, read from
    ``base`` (the profile's results folder) and ``runs/<slug>/results/<profile>``; an answer whose
    run failed (its slug in ``failed``) or saved nothing says so."""
    rows = []
    for p in PREDICTIONS:
        run = runs / p.slug / "results" / base.name
        try:
            if p.slug in failed:
                raise FileNotFoundError(f"the run of {p.chapter} with {p.override} failed; its page says why")
            answer = p.answer(base, run)
        except FileNotFoundError as missing:
            answer = f"not measured: {missing}"
        rows.append({"chapter": p.chapter, "override": p.override, "answer": answer})
    return pd.DataFrame(rows, columns=["chapter", "override", "answer"])
