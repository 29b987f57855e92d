"""Three ways to remove a head (chapter 12): zero (the paper's mask), mean and resample ablation
(helpers/heads/removal.py), compared on the same heads, models and examples.

    sets = example_sets(sweeps, {"nli": ("matched", 0, 0)}, ("train", 32), seed=0)
    effects = by_removal(sweeps, sets["nli"], "likelihood")   # every seed and kind
    table = agreement(effects)          # Spearman between kinds, overlap of the 10 most important

The reference set (the means, the donors) is drawn from a split the scores never see. The
translation model is scored by likelihood only: mean and resample ablation replace a head's
output position by position, which step-by-step decoding cannot do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from ...heads.removal import REMOVAL_KINDS
from ...heads.significance import Bootstrap
from . import one_head
from .sweeps import HeadSweeps

TOP = 10  # "the 10 most important heads": those whose removal lowers the score most


def by_removal(
    sweeps: HeadSweeps, scored: RemovalSet, measure: str, kinds: Sequence[str] = REMOVAL_KINDS
) -> pd.DataFrame:
    """One-head effects of every training run of ``scored.name`` on the examples of ``scored`` under each
    removal kind, stacked with ``removal`` and ``training_seed`` (``head_effects``' columns). Zero
    ablation reads its outputs from the sweep over ``scored.within`` (chapter 03's, in the cache);
    mean and resample ablation are computed on the scored examples."""

    name = scored.name

    def one(kind: str) -> pd.DataFrame:
        if kind == "zero":
            return sweeps.effects(name, scored.within, "one_head", measure, positions=scored.positions)
        return sweeps.effects(name, scored.examples, "one_head", measure, (kind, scored.reference))

    return pd.concat([one(kind).assign(removal=kind) for kind in kinds], ignore_index=True)


@dataclass(frozen=True)
class RemovalSet:
    """The examples chapter 12 scores model ``name`` on under every removal kind: those at
    ``positions`` of ``within`` (the set another chapter sweeps, whose zero-ablation outputs it
    reuses), and the ``reference`` set that mean and resample ablation draw on (never scored)."""

    name: str
    within: list
    positions: list[int]
    reference: list

    @property
    def examples(self) -> list:
        return [self.within[i] for i in self.positions]


def language_model_effects(grid: pd.DataFrame, removal: str, examples: int | None = None) -> pd.DataFrame:
    """Chapter 11's one-head grid (``language_model.one_head_grid``) as effect rows: ``delta`` is
    the change of the mean log-likelihood per token, -log(masked / unmasked perplexity), nats."""
    delta = -np.log1p(grid["change_pct"] / 100)
    return pd.DataFrame(
        {
            "kind": "self",
            "layer": grid["layer"],
            "head": grid["head"],
            "heads": [[h] for h in grid["head"]],
            "delta": delta,
            "p_value": grid["p_value"],
            "significant": grid["significant"],
            "delta_low": grid["delta_low"],
            "delta_high": grid["delta_high"],
            "removal": removal,
            "training_seed": 0,
            "examples": examples,
        }
    )


def counts_by_removal(
    models: Sequence[tuple[str, pd.DataFrame]],
    margins: Mapping[str, float],
    measure: str,
    seedless: Sequence[str] = (),
) -> pd.DataFrame:
    """Chapter 03's counts table (``one_head.counts``: significant, and each equivalence class against
    δ) per model, seed and attention kind, once per removal kind (a ``removal`` column). Models in
    ``seedless`` (not trained here, e.g. SmolLM2) get no training seed: the scorecard counts them
    with every seed's rows."""
    table = pd.concat(
        [
            one_head.counts([(name, part.drop(columns="removal"))], margins, measure).assign(removal=kind)
            for name, effects in models
            for kind, part in effects.groupby("removal", sort=False)
        ],
        ignore_index=True,
    )
    table["training_seed"] = table["training_seed"].astype("Int64").mask(table["model"].isin(seedless))
    return table


EFFECT_COLUMNS = [
    "model",
    "training_seed",
    "removal",
    "kind",
    "layer",
    "head",
    "delta",
    "delta_low",
    "delta_high",
    "p_value",
    "significant",
    "examples",
]


def effect_table(models: Sequence[tuple[str, pd.DataFrame]], seedless: Sequence[str] = ()) -> pd.DataFrame:
    """The per-head rows ``counts`` and ``agreement`` summarise, one table for the results folder:
    one row per model, seed, removal kind and head (``EFFECT_COLUMNS``; ``delta`` and its interval
    in the score's units), seedless models without a training seed as in ``counts``."""
    table = pd.concat([effects.assign(model=name) for name, effects in models], ignore_index=True)[EFFECT_COLUMNS]
    table["training_seed"] = table["training_seed"].astype("Int64").mask(table["model"].isin(seedless))
    return table


SAMPLE_COLUMNS = ["measure", "model", "units", "unit", "min_units", "measured", "reason"]


def save_counts(
    by_measure: Mapping[str, Sequence[tuple[str, pd.DataFrame]]],
    margins: Mapping[str, float],
    profile: str,
    seedless: Sequence[str] = (),
) -> dict[str, pd.DataFrame]:
    """For each measure (``"metric"``, ``"likelihood"``) and its models' effects: save the per-head
    rows (``12_removal_effects``) and ``counts`` (``12_removal_counts``), both with the measure's
    table suffix; returns ``{measure: counts}``. A model whose effects are empty because its sample
    was below the minimum (``language_model_by_removal``) gets no rows there, and
    ``12_removal_samples`` says so with its n."""
    from ..store.results import save_table

    out = {}
    samples = [
        {
            "measure": measure,
            "model": name,
            "units": effects.attrs["units"],
            "unit": effects.attrs["unit"],
            "min_units": effects.attrs["min_units"],
            "measured": not effects.empty,
            "reason": effects.attrs.get("reason", ""),
        }
        for measure, models in by_measure.items()
        for name, effects in models
        if "units" in effects.attrs
    ]
    save_table(pd.DataFrame(samples, columns=SAMPLE_COLUMNS), profile, "12_removal_samples")
    for measure, models in by_measure.items():
        suffix = "_likelihood" if measure == "likelihood" else ""
        models = [(name, effects) for name, effects in models if not effects.empty]  # not measured: no rows
        save_table(effect_table(models, seedless), profile, f"12_removal_effects{suffix}")
        out[measure] = counts_by_removal(models, margins, measure, seedless)
        save_table(out[measure], profile, f"12_removal_counts{suffix}")
    return out


def example_sets(
    sweeps: HeadSweeps, scored: Mapping[str, tuple[str, int, int]], reference: tuple[str, int], seed: int
) -> dict[str, RemovalSet]:
    """``{model: RemovalSet}``: ``scored[model] = (split, m, n)``: within the m examples of that
    split that chapter 03 sweeps (0: all; ``course.subset`` draws them as it does), n of them drawn
    at random (0: all); the reference set: ``reference = (split, examples)``, that many examples
    of that split drawn at random."""
    from .. import course

    reference_split, reference_examples = reference
    out = {}
    for name, (split, m, n) in scored.items():
        within = course.subset(sweeps.data(name)[split], m)
        positions = course.subset(list(range(len(within))), n, seed)
        out[name] = RemovalSet(
            name, within, positions, course.subset(sweeps.data(name)[reference_split], reference_examples, seed + 1)
        )
    return out


CHAPTER_11 = "11_nine_heads"
CHAPTER_11_VERSES = (
    "model_name",
    "version",
    "max_words",
    "select_verses",
    "report_verses",
    "batch_size",
    "configs_per_pass",
    "seed",
)  # what makes chapter 11's verses and its one-head grid


def chapter_11_verses(settings) -> dict:
    """Chapter 11's language model and verse settings on this profile (its parameters cell, then
    the profile's values for it): chapter 12 scores the same verses, so its zero rows are chapter
    11's own grid, read from the sweep cache."""
    from ..profiles.parameters import declared_parameters
    from ..profiles.profile import NOTEBOOKS, parameters_for

    p = {**declared_parameters(NOTEBOOKS / f"{CHAPTER_11}.ipynb"), **parameters_for(settings, CHAPTER_11, {})}
    return {name: p[name] for name in CHAPTER_11_VERSES}


def language_model_by_removal(
    settings,
    verses: int,
    reference_verses: int,
    bootstrap: Bootstrap,
    kinds: Sequence[str] = REMOVAL_KINDS,
    run: bool = True,
) -> pd.DataFrame:
    """The one-head grid of chapter 11's causal LM (``language_model.one_head_grid``) under each
    removal kind, as effect rows (``language_model_effects``), on ``verses`` verses drawn at random
    (with the bootstrap's seed; 0: all of them) from chapter 11's select set
    (``chapter_11_verses``). Zero ablation reads those verses' rows from chapter 11's grid over the
    whole select set, in the LM's sweep cache; mean and resample ablation are computed on the drawn
    verses, their means and donors from ``reference_verses`` other verses (other chapters), one
    verse per pass. Fewer than the bootstrap's ``min_units`` verses are no sample for a bootstrap: then nothing is
    computed and the frame is empty, as it is with ``run`` off (a profile that cannot afford
    the sweeps). Either way ``.attrs`` holds ``units`` (the verses), ``min_units`` and ``reason``
    (why nothing was measured, or ""), which ``save_counts`` records (``12_removal_samples``)."""
    from ...heads.removal import reference_outputs
    from ...zoo.causal_lm import lm_batch_order, lm_batches, load_causal_lm, sweeps_dir, token_nll, verse_texts
    from .. import course
    from .language_model import one_head_grid

    seed, min_units = bootstrap.seed, bootstrap.min_units
    eleven = chapter_11_verses(settings)
    lm_name, batch_size, configs_per_pass = eleven["model_name"], eleven["batch_size"], eleven["configs_per_pass"]
    sizes = {"select": eleven["select_verses"], "report": eleven["report_verses"], "reference": reference_verses}
    texts = verse_texts(sizes, version=eleven["version"], max_words=eleven["max_words"], seed=eleven["seed"])
    select = texts["select"]
    chosen = course.subset(list(range(len(select))), verses, seed)
    reason = (
        ("" if len(chosen) >= min_units else f"a bootstrap needs at least {min_units} verses")
        if run
        else "not run on this profile (`lm_removals`), for its cost"
    )
    sample = {"units": len(chosen), "unit": "verses", "min_units": min_units, "reason": reason}
    if reason:
        empty = pd.DataFrame(columns=[c for c in EFFECT_COLUMNS if c != "model"])
        empty.attrs.update(sample)
        return empty
    model, tokenizer = load_causal_lm(lm_name, seed=eleven["seed"])
    row_of = {text_index: row for row, text_index in enumerate(lm_batch_order(tokenizer, select))}
    out = []
    for kind in kinds:
        if kind == "zero":
            grid, _ = one_head_grid(
                model,
                lm_batches(tokenizer, select, batch_size),
                configs_per_pass,
                bootstrap,
                progress=False,
                cache_dir=sweeps_dir(lm_name, eleven["seed"]),
                positions=sorted(row_of[i] for i in chosen),
            )
        else:
            removal = reference_outputs(
                model, [lm_batches(tokenizer, [t], 1)[0] for t in texts["reference"]], token_nll, kind
            )
            grid, _ = one_head_grid(
                model,
                lm_batches(tokenizer, [select[i] for i in chosen], batch_size),
                configs_per_pass,
                bootstrap,
                removal,
                progress=False,
                cache_dir=sweeps_dir(lm_name, eleven["seed"]),
            )
        out.append(language_model_effects(grid, kind, examples=len(chosen)))
    effects = pd.concat(out, ignore_index=True)
    effects.attrs.update(sample)
    return effects


def agreement(models: Sequence[tuple[str, pd.DataFrame]], top: int = TOP) -> pd.DataFrame:
    """Per model, training seed and pair of removal kinds: the Spearman correlation of the heads'
    changes, and how many of the ``top`` heads whose removal lowers the score most are the same."""
    rows = []
    for name, effects in models:
        for seed, part in effects.groupby("training_seed"):
            by_kind = {
                k: p.set_index(["kind", "layer", "head"])["delta"] for k, p in part.groupby("removal", sort=False)
            }
            for a, b in combinations(by_kind, 2):
                x, y = by_kind[a].align(by_kind[b], join="inner")
                rows.append(
                    {
                        "model": name,
                        "training_seed": int(seed),
                        "kinds": f"{a} vs {b}",
                        "heads": len(x),
                        "spearman": spearman(x.to_numpy(), y.to_numpy()),
                        f"top {top} shared": len(set(x.nsmallest(top).index) & set(y.nsmallest(top).index)),
                    }
                )
    return pd.DataFrame(rows)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); nan when either side is constant."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def class_tables(counts: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """``class_table`` of each measure's counts (``save_counts``' result), stacked, with ``score``
    (accuracy for the paper's metric, as chapter 12 scores only the classifier there)."""
    names = {"metric": "accuracy", "likelihood": "likelihood"}
    return pd.concat([class_table(table).assign(score=names[m]) for m, table in counts.items()])


def labelled(by_measure: Mapping[str, Sequence[tuple[str, pd.DataFrame]]]) -> list[tuple[str, pd.DataFrame]]:
    """Every ``(model, effects)`` of ``by_measure`` (``save_counts``' input) as one list for
    ``agreement``, a model measured both ways named with its score: ``nli (accuracy)``."""
    twice = {name for name, _ in by_measure.get("metric", [])} & {name for name, _ in by_measure.get("likelihood", [])}
    return [
        (f"{name} ({'accuracy' if measure == 'metric' else 'likelihood'})" if name in twice else name, effects)
        for measure, models in by_measure.items()
        for name, effects in models
    ]


def class_table(counts_table: pd.DataFrame) -> pd.DataFrame:
    """Per model, seed and removal kind (attention kinds summed): heads, significant, negligible,
    harmful, helpful, undetermined."""
    columns = ["heads", "significant", "negligible", "harmful", "helpful", "undetermined"]
    return (
        counts_table.groupby(["model", "training_seed", "removal"], sort=False, dropna=False)[columns]
        .sum()
        .reset_index()
    )
