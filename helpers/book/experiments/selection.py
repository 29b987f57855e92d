"""Four ways to choose which heads go (chapter 12): I_h, one-head ablation, chance, and
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
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...probes.l0_gates import ConcreteGates, train_concrete_gates
from ...sweeps.pruning_curves import counts, heads_of, score_specs, spec_of
from ...zoo.classifier_training import batches as classifier_batches
from ...zoo.classifier_training import encode, labels_of
from ...zoo.scorers import translation_loss, translation_loss_batches
from .. import course
from ..store.columns import RANDOM_HIGH, RANDOM_LOW, RANDOM_MEAN
from .equivalence import margin
from .pruning import PruningRuns, panel, summarise

L0_ORDER = "L0 gates"
GATE_BATCH = 16  # classifier examples per gate-training step
GATE_MAX_TOKENS = 500  # translation: padded tokens per gate-training step (about 20 verses)
METHODS = ("importance", "ablation", RANDOM_MEAN, RANDOM_LOW, RANDOM_HIGH, L0_ORDER)


def gate_training_batches(runs: PruningRuns, name: str, model, tokenizer, examples: int, seed: int) -> list:
    """Batches of ``examples`` examples of the importance split (drawn with ``seed``) for the gates."""
    data = course.subset(runs.sweeps.data(name)[runs.importance_split], examples, seed)
    if tokenizer is None:
        return translation_loss_batches(model, data, max_tokens=GATE_MAX_TOKENS)
    encoded = encode(tokenizer, data, runs.sweeps.settings.max_length(name))
    encoded["labels"] = labels_of(data)
    return list(classifier_batches(encoded, GATE_BATCH))


def task_loss(tokenizer):
    """The scalar loss the gates learn against: mean cross-entropy of the gold label, or of the
    reference per target token (nats)."""
    if tokenizer is None:

        def loss(model, batch):
            tokens = batch["target"].ne(model.decoder.dictionary.pad()).sum()
            return translation_loss(model, batch).sum() / tokens

        return loss

    def loss(model, batch):
        labels = batch["labels"]
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        return torch.nn.functional.cross_entropy(model(**inputs).logits.float(), labels)

    return loss


def l0_curves(
    runs: PruningRuns,
    name: str,
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
    penalty, pruned, share, score, seconds (training time of that penalty's gates).
    """
    track = "classifier" if name == runs.classifier else "translation"
    curves, points = [], []
    for training_seed, run in course.seed_runs(runs.sweeps.settings, name, runs.sweeps.training_seeds):
        model, tokenizer, score = runs.scored_run(name, run, measure)
        trained = _trained_gates(runs, name, run, model, tokenizer, penalties, steps, examples, seed, progress)
        pool = heads_of(model)
        ranking = trained[len(trained) // 2][0].ranking(model)
        steps_ = counts(len(pool), runs.step)
        specs = [spec_of(ranking[:c]) for c in steps_] + [g.pruned(model) for g, _ in trained]
        scores = score_specs(model, specs, score, progress=progress, desc=f"{run}: L0 gates")
        curves.append(
            pd.DataFrame(
                {
                    "pruned": steps_,
                    "share": [c / len(pool) for c in steps_],
                    "score": scores[: len(steps_)],
                    "order": L0_ORDER,
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
                }
            )
    return pd.concat(curves, ignore_index=True), pd.DataFrame(points)


def _trained_gates(
    runs: PruningRuns,
    name: str,
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
        data = gate_training_batches(runs, name, model, tokenizer, examples, seed)
        trained = []
        for penalty in penalties:
            start = time.perf_counter()
            gates = train_concrete_gates(
                model, data, task_loss(tokenizer), penalty, steps, seed=seed, progress=progress
            )
            trained.append((gates, time.perf_counter() - start))
        runs._loaded[key] = trained
    return runs._loaded[key]


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
    """``summary`` over seeds: per model and method the mean and the range (max - min) of each column."""
    grouped = table.groupby(["model", "method"], sort=False)[["prunable_share", "area"]]
    out = grouped.mean().join(grouped.agg(lambda s: s.max() - s.min()), rsuffix=" range")
    return out.rename(columns={"prunable_share": "prunable share (mean)", "area": "area (mean)"}).reset_index()


CHAPTER_06 = "06_pruning_curves"


def chapter_06_runs(settings, progress: bool = False) -> PruningRuns:
    """``PruningRuns`` with chapter 06's parameters as the profile gives them, so that the gates'
    curves are scored on exactly the sets, scorers and steps of chapter 06's curves."""
    from ..profiles.parameters import declared_parameters
    from ..profiles.profile import NOTEBOOKS, parameters_for
    from .sweeps import Bootstrap, HeadSweeps

    p = {**declared_parameters(NOTEBOOKS / f"{CHAPTER_06}.ipynb"), **parameters_for(settings, CHAPTER_06, {})}
    sweeps = HeadSweeps(
        settings,
        training_seeds=p["training_seeds"],
        decoded_examples=p["decoded_examples"],
        beam=p["beam"],
        max_len_b=p["max_len_b"],
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


def chapter_06_curves(profile: str, measure: str) -> pd.DataFrame:
    """Chapter 06's saved curves (importance, ablation and random orders) of ``measure``."""
    from ..store.results import results_dir

    path = results_dir(profile) / f"{CHAPTER_06}{'_likelihood' if measure == 'likelihood' else ''}.csv"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: this chapter compares with chapter 06's curves; run "
            f"`python -m helpers.book.running.runner --profile {profile} --only {CHAPTER_06}` first"
        )
    return pd.read_csv(path)


def four_methods(
    runs: PruningRuns, profile: str, measure: str, penalties: Sequence[float], steps: int, examples: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Chapter 06's curves of ``measure`` with the L0 gates' curve added, for both of its models,
    and the gates' points. The unpruned score of each run must equal chapter 06's: else the sets differ."""
    saved = chapter_06_curves(profile, measure)
    found = [
        l0_curves(runs, name, measure, penalties, steps, examples, seed)
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
    runs: PruningRuns, profile: str, penalties: Sequence[float], steps: int, examples: int, seed: int
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """``four_methods`` on the paper's metric and on the likelihood (the gates trained once per run):
    ``({measure: curves}, the gates' points of both measures)``."""
    found = {m: four_methods(runs, profile, m, penalties, steps, examples, seed) for m in ("metric", "likelihood")}
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
