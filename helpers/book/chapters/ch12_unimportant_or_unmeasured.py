"""Chapter 12, unimportant or unmeasured: its experiment, the rules that judge its claims and its findings in words.

Three ways to remove a head (chapter 12): zero (the paper's mask), mean and resample ablation
(helpers/heads/removal.py), compared on the same heads, models and examples.

    sets = example_sets(sweeps, {"nli": ("matched", 0, 0)}, ("train", 32), seed=0)
    effects = by_removal(sweeps, sets["nli"], "likelihood")   # every seed and kind
    table = agreement(effects)          # Spearman between kinds, overlap of the 10 most important

The reference set (the means, the donors) is drawn from a split the scores never see. The
translation model is scored by likelihood only: mean and resample ablation replace a head's
output position by position, which step-by-step decoding cannot do.

Four ways to choose which heads go (chapter 12): I_h, one-head ablation, chance, and
hard-concrete gates trained with an L0 penalty (Voita et al. 2019; probes/l0_gates.py).

Chapter 06 draws the first three curves and saves them (``06_pruning_curves``, both measures);
this module adds the fourth on the same models, sets and scorers (``PruningRuns``), and
summarises the four per model, seed and measure: the share prunable within δ and the area
under the curve.

The gates are trained on the model frozen, on the split I_h is estimated on (the train split),
with the model's own loss (gold label cross-entropy; reference cross-entropy per target token).
Each penalty gives one pruned set (the heads whose test gate is 0): a point on the curve. The
gates of the middle penalty also *rank* the heads (lowest log_alpha first), which gives a full
curve at chapter 06's steps, comparable with the other orders.

Chapter 12's claims: chapter 03's verdicts (few heads matter alone, most are negligible alone)
under every way of removing a head (zero, mean, resample). The rules are chapter 03's, read on
``12_removal_counts`` one removal kind at a time (``_verdicts_by_removal``).

``findings``: chapter 12's "What this run shows" paragraph.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ...base.devices import device_of, to_device
from ...heads.gates import heads_of, spec_of
from ...heads.removal import REMOVAL_KINDS
from ...heads.significance import Bootstrap
from ...probes.l0_gates import ConcreteGates, train_concrete_gates
from ...sweeps.pruning_curves import counts, score_specs
from ...sweeps.throughput import device_name
from ...zoo.classifier_training import batches as classifier_batches
from ...zoo.classifier_training import encode, labels_of
from ...zoo.scorers import translation_loss, translation_loss_batches
from .. import course
from ..experiments.equivalence import margin
from ..experiments.pruning_runs import PruningRuns, panel, summarise
from ..experiments.sweeps import HeadSweeps
from ..store import measures
from ..store.columns import CHOSEN, IN_SAMPLE, MIN_BAND_ORDERS, RANDOM_HIGH, RANDOM_LOW, RANDOM_MEAN
from ..store.results import ChapterTables, MissingTable
from ..verdicts import samples
from ..verdicts.engine import (
    CANNOT_TELL,
    MEASURES,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    Claim,
    MissingResults,
    Results,
    ours,
    per_seed,
    present,
    results_folder,
    three_way,
)
from ..verdicts.text import words
from . import ch03_ablating_one_head as ch03

_TOP = 10  # "the 10 most important heads": those whose removal lowers the score most


def by_removal(
    sweeps: HeadSweeps, scored: _RemovalSet, measure: str, kinds: Sequence[str] = REMOVAL_KINDS
) -> pd.DataFrame:
    """One-head effects of every training run of ``scored.name`` on the examples of ``scored`` under each
    removal kind, stacked with ``removal`` and ``training_seed`` (``head_effects``' columns). Zero
    ablation reads its outputs from the sweep over ``scored.within`` (chapter 03's, in the cache);
    mean and resample ablation are computed on the scored examples."""

    name = scored.name

    def one(kind: str) -> pd.DataFrame:
        if kind == "zero":
            return sweeps.effects(name, scored.within, configs="one_head", measure=measure, positions=scored.positions)
        return sweeps.effects(
            name, scored.examples, configs="one_head", measure=measure, removal=(kind, scored.reference)
        )

    return pd.concat([one(kind).assign(removal=kind) for kind in kinds], ignore_index=True)


@dataclass(frozen=True)
class _RemovalSet:
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
    """Chapter 11's one-head grid (``ch11_nine_heads.one_head_grid``) as effect rows: ``delta`` is
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
    """Chapter 03's counts table (``ch03_ablating_one_head.counts``: significant, and each equivalence class against
    δ) per model, seed and attention kind, once per removal kind (a ``removal`` column). Models in
    ``seedless`` (not trained here, e.g. SmolLM2) get no training seed: the scorecard counts them
    with every seed's rows."""
    table = pd.concat(
        [
            ch03.counts([(name, part.drop(columns="removal"))], margins, measure).assign(removal=kind)
            for name, effects in models
            for kind, part in effects.groupby("removal", sort=False)
        ],
        ignore_index=True,
    )
    table["training_seed"] = table["training_seed"].astype("Int64").mask(table["model"].isin(seedless))
    return table


_EFFECT_COLUMNS = [
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


def _effect_table(models: Sequence[tuple[str, pd.DataFrame]], seedless: Sequence[str] = ()) -> pd.DataFrame:
    """The per-head rows ``counts`` and ``agreement`` summarise, one table for the results folder:
    one row per model, seed, removal kind and head (``_EFFECT_COLUMNS``; ``delta`` and its interval
    in the score's units), seedless models without a training seed as in ``counts``."""
    table = pd.concat([effects.assign(model=name) for name, effects in models], ignore_index=True)[_EFFECT_COLUMNS]
    table["training_seed"] = table["training_seed"].astype("Int64").mask(table["model"].isin(seedless))
    return table


_SAMPLE_COLUMNS = ["measure", "model", "units", "unit", "min_units", "measured", "reason"]


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
    save_table(pd.DataFrame(samples, columns=_SAMPLE_COLUMNS), profile, "12_removal_samples")
    for measure, models in by_measure.items():
        suffix = measures.BY_KEY[measure].suffix
        models = [(name, effects) for name, effects in models if not effects.empty]  # not measured: no rows
        save_table(_effect_table(models, seedless), profile, f"12_removal_effects{suffix}")
        out[measure] = counts_by_removal(models, margins, measure, seedless)
        save_table(out[measure], profile, f"12_removal_counts{suffix}")
    return out


def example_sets(
    sweeps: HeadSweeps, scored: Mapping[str, tuple[str, int, int]], reference: tuple[str, int], seed: int
) -> dict[str, _RemovalSet]:
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
        out[name] = _RemovalSet(
            name, within, positions, course.subset(sweeps.data(name)[reference_split], reference_examples, seed + 1)
        )
    return out


_CHAPTER_11 = "11_nine_heads"
_CHAPTER_11_VERSES = (
    "language_model",
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
    from ..profiles.profile import chapter_parameters

    p = chapter_parameters(settings, _CHAPTER_11)
    return {name: p[name] for name in _CHAPTER_11_VERSES}


def language_model_by_removal(
    settings,
    verses: int,
    *,
    reference_verses: int,
    bootstrap: Bootstrap,
    kinds: Sequence[str] = REMOVAL_KINDS,
    run: bool = True,
) -> tuple[str, pd.DataFrame]:
    """``(name, effects)``: chapter 11's causal LM's name, and its one-head grid
    (``ch11_nine_heads.one_head_grid``) under each removal kind as effect rows
    (``language_model_effects``), on ``verses`` verses drawn at random (with the bootstrap's seed;
    0: all of them) from chapter 11's select set (``chapter_11_verses``). Zero ablation reads those
    verses' rows from chapter 11's grid over the whole select set, in the LM's sweep cache; mean
    and resample ablation are computed on the drawn verses, their means and donors from
    ``reference_verses`` other verses (other chapters), one verse per pass. Fewer than the
    bootstrap's ``min_units`` verses are no sample for a bootstrap: then nothing is computed and
    the frame is empty, as it is with ``run`` off (a profile that cannot afford the sweeps).
    Either way ``.attrs`` holds ``units`` (the verses), ``min_units`` and ``reason`` (why nothing
    was measured, or ""), which ``save_counts`` records (``12_removal_samples``)."""
    from ...heads.removal import reference_outputs
    from ...zoo.causal_lm import (
        lm_batch_order,
        lm_batches,
        sweeps_dir,
        token_nll,
        verse_texts,
    )
    from ...zoo.registry import load_causal_lm
    from .. import course
    from .ch11_nine_heads import one_head_grid

    seed, min_units = bootstrap.seed, bootstrap.min_units
    eleven = chapter_11_verses(settings)
    lm_name, batch_size, configs_per_pass = eleven["language_model"], eleven["batch_size"], eleven["configs_per_pass"]
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
        empty = pd.DataFrame(columns=[c for c in _EFFECT_COLUMNS if c != "model"])
        empty.attrs.update(sample)
        return lm_name, empty
    model, tokenizer = load_causal_lm(lm_name, seed=eleven["seed"])
    row_of = {text_index: row for row, text_index in enumerate(lm_batch_order(tokenizer, select))}
    out = []
    for kind in kinds:
        if kind == "zero":
            grid, _ = one_head_grid(
                model,
                lm_batches(tokenizer, select, batch_size),
                configs_per_pass=configs_per_pass,
                bootstrap=bootstrap,
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
                configs_per_pass=configs_per_pass,
                bootstrap=bootstrap,
                removal=removal,
                progress=False,
                cache_dir=sweeps_dir(lm_name, eleven["seed"]),
            )
        out.append(language_model_effects(grid, kind, examples=len(chosen)))
    effects = pd.concat(out, ignore_index=True)
    effects.attrs.update(sample)
    return lm_name, effects


def agreement(models: Sequence[tuple[str, pd.DataFrame]], top: int = _TOP) -> pd.DataFrame:
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


def removal_agreement(by_measure: Mapping[str, Sequence[tuple[str, pd.DataFrame]]]) -> pd.DataFrame:
    """``agreement`` between the removal kinds of every model of ``by_measure`` (``save_counts``'
    input), a model measured both ways once per score (``labelled``)."""
    return agreement(labelled(by_measure))


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


_L0_ORDER = "L0 gates"
_GATE_BATCH = 16  # classifier examples per gate-training step
_GATE_MAX_TOKENS = 500  # translation: padded tokens per gate-training step (about 20 verses)
METHODS = ("importance", "ablation", RANDOM_MEAN, RANDOM_LOW, RANDOM_HIGH, _L0_ORDER)


def _gate_training_batches(runs: PruningRuns, name: str, *, model, tokenizer, examples: int, seed: int) -> list:
    """Batches of ``examples`` examples of the importance split (drawn with ``seed``) for the gates."""
    data = course.subset(runs.sweeps.data(name)[runs.importance_split], examples, seed)
    if tokenizer is None:
        return translation_loss_batches(model, data, max_tokens=_GATE_MAX_TOKENS)
    encoded = encode(tokenizer, data, runs.sweeps.settings.max_length(name))
    encoded["labels"] = labels_of(data)
    return list(classifier_batches(encoded, _GATE_BATCH))


def _task_loss(tokenizer):
    """The scalar loss the gates learn against: mean cross-entropy of the gold label, or of the
    reference per target token (nats)."""
    if tokenizer is None:

        def loss(model, batch):
            tokens = batch["target"].ne(model.decoder.dictionary.pad()).sum()
            return translation_loss(model, batch).sum() / tokens

        return loss

    def loss(model, batch):
        batch = to_device(batch, model)
        labels = batch["labels"]
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        return torch.nn.functional.cross_entropy(model(**inputs).logits.float(), labels)

    return loss


def _l0_curves(
    runs: PruningRuns,
    name: str,
    *,
    measure: str,
    penalties: Sequence[float],
    steps: int,
    examples: int,
    seed: int,
    progress: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For every training run of ``name``: gates trained at each penalty (kept per run, so the
    second measure reuses them), scored on ``measure`` as chapter 06 scores its curves.

    Returns ``(curve, points)``: the curve of the middle penalty's ranking at chapter 06's steps
    (columns pruned, share, score, order, model, training_seed, track), and one row per penalty:
    penalty, pruned, share, score, seconds (training time of that penalty's gates) and the device
    they trained on.
    """
    track = "classifier" if name == runs.classifier else "translation"
    curves, points = [], []
    for training_seed, run in course.seed_runs(runs.sweeps.settings, name, runs.sweeps.training_seeds):
        model, tokenizer, score = runs.scored_run(name, run, measure)
        trained = _trained_gates(
            runs,
            name,
            run=run,
            model=model,
            tokenizer=tokenizer,
            penalties=penalties,
            steps=steps,
            examples=examples,
            seed=seed,
            progress=progress,
        )
        pool = heads_of(model)
        ranking = trained[len(trained) // 2][0].ranking(model)
        steps_ = counts(len(pool), runs.step)
        specs = [spec_of(ranking[:c]) for c in steps_] + [g.pruned(model) for g, _ in trained]
        scores = score_specs(model, specs, evaluate=score, progress=progress, desc=f"{run}: L0 gates")
        curves.append(
            pd.DataFrame(
                {
                    "pruned": steps_,
                    "share": [c / len(pool) for c in steps_],
                    "score": scores[: len(steps_)],
                    "order": _L0_ORDER,
                    "model": name,
                    "training_seed": training_seed,
                    "track": track,
                    "selected_on": f"{runs.importance_split} (gates trained)",
                }
            )
        )
        for (gates, seconds), spec, s in zip(trained, specs[len(steps_) :], scores[len(steps_) :]):
            n = sum(len(h) for layers in spec.values() for h in layers.values())
            points.append(
                {
                    "model": name,
                    "track": track,
                    "training_seed": training_seed,
                    "penalty": gates.penalty,
                    "pruned": n,
                    "share": n / len(pool),
                    "score": s,
                    "seconds": seconds,
                    "device": device_name(device_of(model)),
                }
            )
    return pd.concat(curves, ignore_index=True), pd.DataFrame(points)


def _trained_gates(
    runs: PruningRuns,
    name: str,
    *,
    run: str,
    model,
    tokenizer,
    penalties: Sequence[float],
    steps: int,
    examples: int,
    seed: int,
    progress: bool,
) -> list[tuple[ConcreteGates, float]]:
    """``[(gates, training seconds)]`` per penalty, trained once per run and setting (kept with the
    loaded run in ``runs``, so the second measure reuses them)."""
    key = ("L0 gates", run, tuple(penalties), steps, examples, seed)
    if key not in runs._loaded:
        data = _gate_training_batches(runs, name, model=model, tokenizer=tokenizer, examples=examples, seed=seed)
        trained = []
        for penalty in penalties:
            start = time.perf_counter()
            gates = train_concrete_gates(
                model, data, loss=_task_loss(tokenizer), penalty=penalty, steps=steps, seed=seed, progress=progress
            )
            trained.append((gates, time.perf_counter() - start))
        runs._loaded[key] = trained
    return runs._loaded[key]


def _on(points: pd.DataFrame) -> str:
    """`` (on <device>)`` of the L0 points' timings, where the table names it."""
    return f" (on {words(sorted(points['device'].unique()))})" if "device" in points else ""


def area(curve: pd.DataFrame) -> float:
    """Area under score against share pruned (0..1), by the trapezoid rule, minus the unpruned
    score: 0 when pruning costs nothing, more negative the sooner the score falls (units of the
    score)."""
    part = curve.sort_values("share")
    base = float(part.loc[part["pruned"] == 0, "score"].iloc[0])
    return float(np.trapezoid(part["score"] - base, part["share"]))


def summary(curves: pd.DataFrame, margins: Mapping[str, float], measure: str) -> pd.DataFrame:
    """Chapter 06's ``summarise`` with chapter 03's δ as the tolerance and the area under each
    curve: one row per track, model, seed and method (random: the mean over its orders)."""
    table = summarise(curves, {t: margin(t, measure, margins) for t in curves["track"].unique()}, {"area": area})
    table = table.rename(columns={"order": "method"})
    return table[table["method"].isin(METHODS)].reset_index(drop=True)


def spreads(summaries: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """``spread`` of each measure's ``summary`` (``{measure: summary}``), stacked with ``score``."""
    return pd.concat([spread(t).assign(score=m) for m, t in summaries.items()], ignore_index=True)


def spread(table: pd.DataFrame) -> pd.DataFrame:
    """``summary`` over seeds: per model and method the mean prunable share with its smallest and
    largest, the mean area, the range (max - min) of each, and ``out of sample``: whether every
    seed chose the method's heads on data its curve does not score (where the table says)."""
    grouped = table.groupby(["model", "method"], sort=False)
    out = pd.DataFrame(
        {
            "prunable share (mean)": grouped["prunable_share"].mean(),
            "area (mean)": grouped["area"].mean(),
            "prunable share (min)": grouped["prunable_share"].min(),
            "prunable share (max)": grouped["prunable_share"].max(),
            "prunable_share range": grouped["prunable_share"].max() - grouped["prunable_share"].min(),
            "area range": grouped["area"].max() - grouped["area"].min(),
        }
    )
    if "selected_on" in table:
        out["out of sample"] = grouped["selected_on"].agg(lambda s: bool((s != IN_SAMPLE).all()))
    return out.reset_index()


def selection_tables(summaries: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The tables chapter 12 saves of ``{measure: summary}``: each measure's ``summary``
    (``12_selection``) and its ``spread`` over seeds (``12_selection_spread``), with the measure's
    suffix."""
    out = {}
    for measure, table in summaries.items():
        suffix = measures.BY_KEY[measure].suffix
        out[f"12_selection{suffix}"] = table
        out[f"12_selection_spread{suffix}"] = spread(table)
    return out


_CHAPTER_06 = "06_pruning_curves"


def chapter_06_runs(settings, progress: bool = False) -> PruningRuns:
    """``PruningRuns`` with chapter 06's parameters as the profile gives them, so that the gates'
    curves are scored on exactly the sets, scorers and steps of chapter 06's curves."""
    from ..experiments.sweeps import Bootstrap, HeadSweeps
    from ..profiles.parameters import declared_parameters
    from ..profiles.profile import NOTEBOOKS, parameters_for

    p = {**declared_parameters(NOTEBOOKS / f"{_CHAPTER_06}.ipynb"), **parameters_for(settings, _CHAPTER_06, {})}
    sweeps = HeadSweeps(
        settings,
        training_seeds=p["training_seeds"],
        decoded_examples=p["decoded_examples"],
        beam=p["beam"],
        max_len_b=p["max_len_b"],
        max_len_a=p["max_len_a"],
        progress=progress,
        bootstrap=Bootstrap(min_units=p["min_units"]),
    )
    keys = (
        "importance_split",
        "importance_examples",
        "max_examples",
        "ablation_examples",
        "random_orders",
        "reestimate",
        "step",
        "seed",
        "bleu_random_orders",
        "held_out_ablation",
    )
    return PruningRuns(
        sweeps,
        p["classifier"],
        p["classifier_split"],
        p["translation"],
        p["translation_split"],
        **{k: p[k] for k in keys},
    )


def _chapter_06_curves(profile: str, measure: str) -> pd.DataFrame:
    """Chapter 06's saved curves (importance, ablation and random orders) of ``measure``."""
    from ..store.results import read_table

    return read_table(profile, measures.BY_KEY[measure].table(_CHAPTER_06))


def _four_methods(
    runs: PruningRuns, profile: str, *, measure: str, penalties: Sequence[float], steps: int, examples: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Chapter 06's curves of ``measure`` with the L0 gates' curve added, for both of its models,
    and the gates' points. The unpruned score of each run must equal chapter 06's: else the sets differ."""
    saved = _chapter_06_curves(profile, measure)
    found = [
        _l0_curves(runs, name, measure=measure, penalties=penalties, steps=steps, examples=examples, seed=seed)
        for name in (runs.classifier, runs.translation)
    ]
    l0 = pd.concat([c for c, _ in found], ignore_index=True)
    for (name, training_seed), part in l0.groupby(["model", "training_seed"]):
        theirs = saved[(saved["model"] == name) & (saved["training_seed"] == training_seed) & (saved["pruned"] == 0)]
        ours = float(part.loc[part["pruned"] == 0, "score"].iloc[0])
        theirs_score = float(theirs["score"].iloc[0]) if len(theirs) else math.nan
        if not np.isclose(theirs_score, ours, rtol=1e-6, atol=1e-9):
            raise ValueError(
                f"{name} seed {training_seed}: unpruned score {ours:.6g} here but {theirs_score:.6g} in "
                "chapter 06's curves: rerun chapter 06 with the profile's parameters"
            )
    curves = pd.concat([saved[saved["order"] != "re-estimated"], l0], ignore_index=True)
    return curves, pd.concat([p for _, p in found], ignore_index=True).assign(measure=measure)


def both_measures(
    runs: PruningRuns, profile: str, *, penalties: Sequence[float], steps: int, examples: int, seed: int
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """``_four_methods`` on the paper's metric and on the likelihood (the gates trained once per run):
    ``({measure: curves}, the gates' points of both measures)``."""
    found = {
        m: _four_methods(runs, profile, measure=m, penalties=penalties, steps=steps, examples=examples, seed=seed)
        for m in measures.BY_KEY
    }
    return {m: c for m, (c, _) in found.items()}, pd.concat([p for _, p in found.values()], ignore_index=True)


def figure(curves: dict[str, pd.DataFrame], panels: Sequence[tuple[str, str]], profile: str):
    """The four methods' curves, first training run: one row of chapter 06's panels per measure
    (``curves[measure]``), one column per ``(model, the split its curves score)``; random orders
    as a band."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(curves), len(panels), figsize=(12, 3.8 * len(curves)), squeeze=False)
    for row, (measure, table) in zip(axes, curves.items()):
        for ax, (name, split) in zip(row, panels):
            panel(ax, course.first_seed(table[table["model"] == name]), f"{name} on {split} ({measure})", measure)
    fig.suptitle(f"four ways to choose which heads go ({profile} profile, first training run)")
    fig.tight_layout()
    return fig


CHAPTER = "12_unimportant_or_unmeasured"
COUNTS = "12_removal_counts"
_REMOVAL_RULES = {"few_significant": ch03.few_significant, "most_negligible": ch03.most_negligible}


class _OneRemoval(Results):
    """``r`` as chapter 03's tables would read if heads were removed by ``removal`` (zero, mean or
    resample): ``03_one_head_counts`` is chapter 12's ``12_removal_counts`` rows of that kind."""

    def __init__(self, r: Results, removal: str):
        super().__init__(r.folder, r.training_seed, r.measure, r.params)
        self.removal = removal

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name != ch03.COUNTS:
            return super().__getitem__(name)
        table = super().__getitem__(COUNTS)
        return present(table[table["removal"] == self.removal], f"{COUNTS}: {self.removal}")


def _every_removal(check: Callable[[Results], tuple[str, str]]) -> Callable[[Results], tuple[str, str]]:
    """Chapter 03's ``check`` applied to the counts of each way of removing a head: reproduced
    when it is reproduced under every one, partly when under some (or partly under any); where it
    holds under none, not reproduced if any kind refutes it (the others' "cannot tell" does not
    hide a refutation), else cannot tell."""

    def judged(r: Results) -> tuple[str, str]:
        found = {kind: check(_OneRemoval(r, kind)) for kind in dict.fromkeys(r[COUNTS]["removal"])}
        verdicts = [v for _, v in found.values()]
        text = "; ".join(f"{kind}: {t} ({v})" for kind, (t, v) in found.items())
        if any(v in (REPRODUCED, PARTLY) for v in verdicts):
            return text, three_way(all(v == REPRODUCED for v in verdicts), True)
        return text, NOT_REPRODUCED if NOT_REPRODUCED in verdicts else CANNOT_TELL

    return judged


def _every_removal_statistic(statistic):
    """Chapter 03's between-seed ``statistic`` under each way of removing a head, one component
    per removal kind and model."""

    def per_kind(r: Results) -> dict:
        return {
            f"{kind}, {name}": value
            for kind in dict.fromkeys(r[COUNTS]["removal"])
            for name, value in statistic(_OneRemoval(r, kind)).items()
        }

    return per_kind


def _verdicts_by_removal(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """Chapter 03's two rules under each way of removing a head, one row per rule, measure, training
    seed and removal kind (zero, mean, resample), from ``12_removal_counts``: which verdicts change
    with the kind. Columns: key, measure, models (those the measure's counts hold: on the paper's
    metric the classifiers alone, see the module's docstring), training_seed, removal, ours, verdict."""
    folder = results_folder(profile, results_root)
    rows = []
    for measure, name in MEASURES.items():
        results = Results(folder, measure=measure)
        try:
            kinds = list(dict.fromkeys(results[COUNTS]["removal"]))
        except MissingResults:
            continue
        models = words(sorted(set(ours(results[COUNTS])["model"])))  # the data every kind is judged on
        for key, check in _REMOVAL_RULES.items():
            for kind in kinds:
                try:
                    found = per_seed(CHAPTER, lambda r, check=check, kind=kind: check(_OneRemoval(r, kind)), results)
                except MissingResults:  # no seed with every model (a profile that trains none)
                    continue
                rows += [
                    {
                        "key": key,
                        "measure": name,
                        "models": models,
                        "training_seed": seed,
                        "removal": kind,
                        "ours": text,
                        "verdict": verdict,
                    }
                    for seed, (text, verdict) in found.items()
                ]
    return pd.DataFrame(rows, columns=["key", "measure", "models", "training_seed", "removal", "ours", "verdict"])


def removal_table(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """``_verdicts_by_removal`` laid out to read: one row per rule, measure (with the models it
    holds) and training seed, one verdict column per removal kind."""
    table = _verdicts_by_removal(profile, results_root)
    if table.empty:
        return table
    kinds = list(dict.fromkeys(table["removal"]))
    return table.pivot_table(
        index=["key", "measure", "models", "training_seed"], columns="removal", values="verdict", aggfunc="first"
    )[kinds]


# chapter 12's counts hold the translation model on the likelihood only (see the module's docstring)
_MODELS_JUDGED = (
    "not reproduced: under no way, and refuted under some (another way's cannot tell does not hide a refutation); "
    "judged on the models removed every way: on the paper's metric the classifier alone, on the likelihood the "
    "translation model and chapter 11's language model too"
)


def counts_sample(r: Results) -> str:
    return samples.one_head(r[COUNTS])


CLAIMS = [
    Claim(
        "few_significant_every_removal",
        "§3.2, Table 1",
        "Few heads matter alone, whether a head is zeroed, replaced by its mean or by its output on another example",
        "masking (zero) only",
        f"reproduced: chapter 03's rule (under {ch03.FEW_SHARE:.0%} significant in every model) holds under every "
        f"way of removing a head; partly: under some; {_MODELS_JUDGED}",
        CHAPTER,
        _every_removal(ch03.few_significant),
        likelihood=True,
        sample=counts_sample,
        seed_statistic=_every_removal_statistic(ch03.shares_of("significant", "unplaced")),
    ),
    Claim(
        "most_negligible_every_removal",
        "§3.2, Table 1",
        "Most heads are shown negligible alone, whichever way a head is removed",
        f"{ch03.PAPER_COUNT} significant, masking only (the paper tests no equivalence)",
        f"reproduced: chapter 03's rule (over {1 - ch03.FEW_SHARE:.0%} negligible in every model) holds under every "
        f"way of removing a head; partly: under some; {_MODELS_JUDGED}",
        CHAPTER,
        _every_removal(ch03.most_negligible),
        likelihood=True,
        sample=counts_sample,
        seed_statistic=_every_removal_statistic(ch03.shares_of("negligible", "undetermined")),
    ),
]


def _seed(value) -> str:
    return "no training seed" if pd.isna(value) else f"seed {int(value)}"


def _not_measured_lines(tables: ChapterTables) -> list[str]:
    """The models whose sample was below a bootstrap's minimum, so that no removal was tested on them."""
    try:
        samples = tables["12_removal_samples"]
    except MissingTable:  # a run from before the minimum
        return []

    def why(r) -> str:
        reason = r.get("reason")
        if isinstance(reason, str) and reason.startswith("not run"):
            return f"{reason}; rerun with `-p lm_removals True` to measure it"
        return f"a bootstrap needs at least {int(r['min_units'])}: rerun with more `lm_verses`"

    return [
        f"**{r['model']}, the {r['measure']}: not measured** (n = {int(r['units'])} {r['unit']}; {why(r)})."
        for _, r in samples.iterrows()
        if not r["measured"]
    ]


def _removal_lines(tables: ChapterTables) -> list[str]:
    """Per measure and model: negligible, harmful and undetermined heads under each removal kind."""
    lines = []
    for suffix, measure in MEASURES.items():
        table = tables[f"12_removal_counts{suffix}"]
        summed = (
            table.groupby(["model", "training_seed", "removal"], sort=False, dropna=False)[
                ["heads", "significant", "negligible", "harmful", "helpful", "undetermined"]
            ]
            .sum()
            .reset_index()
        )
        for (name, seed), part in summed.groupby(["model", "training_seed"], sort=False, dropna=False):
            heads = int(part["heads"].iloc[0])
            per_kind = [
                f"{r.removal} {int(r.negligible)} negligible, {int(r.harmful)} harmful, "
                f"{int(r.undetermined)} undetermined ({int(r.significant)} significant)"
                for r in part.itertuples()
            ]
            lines.append(f"**{name}, {measure}, {_seed(seed)}** ({heads} heads): {'; '.join(per_kind)}.")
    return lines


def _agreement_lines(tables: ChapterTables) -> list[str]:
    """The Spearman correlations between kinds and the shared most important heads, per model."""
    table = tables["12_removal_agreement"]
    top = next(c for c in table.columns if c.startswith("top "))
    lines = []
    for name, part in table.groupby("model", sort=False):
        pairs = [
            f"* {r['kinds']}: r = {r['spearman']:.2f} ({_seed(r['training_seed'])}), {int(r[top])} of the "
            f"{top.split()[1]} most important heads shared."
            for _, r in part.iterrows()
        ]
        lines.append(
            f"**Do the kinds agree on {name}?** The Spearman correlation of the one-head changes, kind against "
            "kind:\n\n" + "\n".join(pairs)
        )
    return lines


def _band_text(part: pd.DataFrame) -> str:
    """Each method that chooses heads against the random orders' band, per seed: on how many seeds
    its prunable share lies above the band's 95th percentile (decided per seed, no method picked
    after the fact)."""
    high = part[part["method"] == RANDOM_HIGH]
    if high.empty:
        return "No band of random orders was run."
    orders = int(high["random_orders"].min()) if "random_orders" in high else 0
    if orders < MIN_BAND_ORDERS:
        return f"With {orders} random orders there is no band to compare with (a 5-95% band needs {MIN_BAND_ORDERS})."
    ceiling = high.set_index("training_seed")["prunable_share"]
    counts = []
    for method, rows in part[part["method"].isin(CHOSEN)].groupby("method", sort=False):
        above = sum(
            bool(share > ceiling.get(seed, float("nan")))
            for seed, share in zip(rows["training_seed"], rows["prunable_share"])
        )
        counts.append(f"{method} on {above} of {len(rows)}")
    return (
        f"Above the 95th percentile of {orders} random orders' shares, seed by seed: {words(counts)}; where a method "
        "is not above it, this run cannot tell it from random pruning."
    )


def _selection_lines(tables: ChapterTables) -> list[str]:
    """Per measure and model: each method's prunable share, which of the methods that choose heads
    out of sample keep the score longest (ties named as ties), and each against the random band."""
    lines = []
    for suffix, measure in MEASURES.items():
        table, spreads_of = tables[f"12_selection{suffix}"], tables[f"12_selection_spread{suffix}"]
        for name, part in table.groupby("model", sort=False):
            each = spreads_of[spreads_of["model"] == name].set_index("method")
            shown = each.drop([RANDOM_LOW, RANDOM_HIGH], errors="ignore").sort_values(
                "prunable share (mean)", ascending=False, kind="stable"
            )
            ranked = "; ".join(
                f"{m} {r['prunable share (mean)']:.0%} ({r['prunable share (min)']:.0%} to "
                f"{r['prunable share (max)']:.0%})"
                for m, r in shown.iterrows()
            )
            fair = each[each.index.isin(CHOSEN) & each["out of sample"].astype(bool)]
            fair_mean, area = fair["prunable share (mean)"], fair["area (mean)"]
            best = [m for m, v in fair_mean.items() if v == fair_mean.max()]
            lines.append(
                f"**Choosing heads on {name}, {measure}:** share prunable within δ, mean over seeds (range): "
                f"{ranked}. Of the methods that choose heads out of sample, "
                + (
                    f"{best[0]} keeps the score longest by that share"
                    if len(best) == 1
                    else f"{words(best)} tie at {fair_mean.max():.0%}"
                )
                + f"; by the area under the curve {area.idxmax()} does. "
                + _band_text(part)
            )
    points = tables["12_l0_points"]
    seconds = points.groupby(["model", "training_seed"])["seconds"].sum()
    lines.append(
        f"The L0 gates took {seconds.min():.0f} to {seconds.max():.0f} s per model and seed to train{_on(points)}, "
        "all penalties "
        f"({words([f'{p:g}' for p in sorted(points['penalty'].unique())])} as penalties); their points prune "
        f"{points['share'].min():.0%} to {points['share'].max():.0%} of the heads."
    )
    return lines


def _changed_verdicts(profile: str) -> str:
    """The scorecard's verdicts on chapter 03's two rules that change with the way a head is removed."""
    table = _verdicts_by_removal(profile)
    changed = []
    for (key, measure, seed), part in table.groupby(["key", "measure", "training_seed"], sort=False, dropna=False):
        if part["verdict"].nunique() > 1:
            changed.append(
                f"{key.replace('_', ' ')} on {measure}, {_seed(seed)}: "
                + ", ".join(f"{k} {v}" for k, v in zip(part["removal"], part["verdict"]))
            )
    if not changed:
        return (
            "**Which verdicts change with the way a head is removed:** none; chapter 03's two rules give the "
            "same verdict under every kind."
        )
    checked = table.groupby(["key", "measure", "training_seed"], dropna=False).ngroups
    return (
        f"**Which verdicts change with the way a head is removed ({len(changed)} of {checked}):** "
        + "; ".join(changed)
        + "."
    )


def findings(tables: ChapterTables) -> str:
    """Chapter 12's findings from its saved tables."""
    return "\n\n".join(
        _removal_lines(tables)
        + _not_measured_lines(tables)
        + [_changed_verdicts(tables.profile)]
        + _agreement_lines(tables)
        + _selection_lines(tables)
    )
