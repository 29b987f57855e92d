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


def _table(folder: Path, name: str) -> pd.DataFrame:
    path = folder / f"{name}.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run the chapter that saves {name} first")
    return pd.read_csv(path)


def _ranking(base: Path, run: Path) -> str:
    from scipy.stats import spearmanr

    both = _table(base, "01_importance").merge(
        _table(run, "01_importance"), on=["layer", "head"], suffixes=("", "_run")
    )
    rho = spearmanr(both["importance"], both["importance_run"]).statistic

    def top(column: str) -> set:
        return set(map(tuple, both.nlargest(5, column)[["layer", "head"]].to_numpy()))

    kept = len(top("importance") & top("importance_run"))
    return f"Spearman's rho between the two rankings of I_h: {rho:.2f}; {kept} of the top 5 heads stay in the top 5"


def _significant(folder: Path, suffix: str = "") -> pd.Series:
    """``model -> "k of n"``: heads significant alone (chapter 03's counts, every seed)."""
    counts = _table(folder, f"03_one_head_counts{suffix}")
    counts = counts[~counts.get("from_paper", False)].groupby("model")[["significant", "heads"]].sum()
    return counts.apply(lambda r: f"{int(r['significant'])} of {int(r['heads'])}", axis=1)


def _significant_at(base: Path, run: Path) -> str:
    mine, lab = _significant(run), _significant(base)
    return "; ".join(f"{m}: {mine[m]} heads significant on its metric (the lab's level: {lab[m]})" for m in mine.index)


def _power(base: Path, run: Path) -> str:
    parts = []
    for suffix, measure in (("", "its metric"), ("_likelihood", "the likelihood")):
        mine, lab = _significant(run, suffix), _significant(base, suffix)
        parts += [f"{m} on {measure}: {mine[m]} (all examples: {lab[m]})" for m in mine.index]
    return "; ".join(parts)


def _reestimated(base: Path, run: Path) -> str:
    shares = _table(run, "06_prunable_shares")
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
    parts = []
    for folder, label in ((run, "at the new alpha"), (base, "at the lab's")):
        looks = _table(folder, "15a_looks").set_index("test")
        heads = _table(folder, "15a_many_heads").iloc[:, 1]
        parts.append(
            f"{label}: one look flags {looks['flags'].iloc[0]:.1%} (chance {looks['chance'].iloc[0]:.1%}), "
            f"a family with a false gain {heads.iloc[0]:.0%} untested, {heads.iloc[1]:.1%} corrected"
        )
    return "; ".join(parts)


def _q4_cache(base: Path, run: Path) -> str:
    def change(folder: Path) -> float:
        quality = _table(folder, "14b_quality")
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


def key_table(base: Path, runs: Path) -> pd.DataFrame:
    """One row per ``PREDICTIONS`` entry: exercise (chapter and override) and answer, read from
    ``base`` (the profile's results folder) and ``runs/<slug>/results/<profile>``; an answer whose
    run is missing says so."""
    rows = []
    for p in PREDICTIONS:
        run = runs / p.slug / "results" / base.name
        try:
            answer = p.answer(base, run)
        except FileNotFoundError as missing:
            answer = f"not measured: {missing}"
        rows.append({"chapter": p.chapter, "override": p.override, "answer": answer})
    return pd.DataFrame(rows, columns=["chapter", "override", "answer"])
