"""§4.2, pruning heads greedily by importance (Figure 3), against the one-head ablation order and
random orders, on every training run, on the paper's metric and on the likelihood.

    runs = PruningRuns(sweeps, classifier="nli", classifier_split="matched", ...)
    curves = runs.curves("nli", "metric")        # every seed: one row per order and pruning step
    summary = summarise(curves, TOLERANCE)       # the share prunable with no noticeable loss

``PruningRuns`` loads each run once and estimates I_h on it once, for both measures; a
classifier's two scores come from the same label log-probabilities, one pass per pruning step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

import pandas as pd

from ...heads.pruning_curves import (heads_of, order_by_ablation, order_by_importance, prunable_share, pruning_curves,
                                     random_order, reestimated_curve)
from ...zoo.scorers import (classifier_importance, classifier_scorers, translation_importance,
                            translation_likelihood_scorer, translation_scorer)
from .. import course
from ..verdicts import paper_values
from .sweeps import HeadSweeps, Run

TOLERANCE = {"classifier": 0.01, "translation": 1.0}  # the paper's "no noticeable loss": 1% accuracy, 1 BLEU
LIKELIHOOD_TOLERANCE = math.log(1.01)  # the likelihood: perplexity at most 1% above the unpruned model's (chapter 11 too)


def orders_and_curves(name: str, model, score: Callable, importance, effects: pd.DataFrame, random_orders: int,
                      seed: int, step: float, reestimate: bool = False) -> pd.DataFrame:
    """The pruning curves of ``model`` by importance, by the one-head ablation ``effects`` and by
    ``random_orders`` random orders (seeds ``seed``, ``seed + 1``, ...), each step scored by
    ``score`` (a step two orders share is scored once); with ``reestimate``, also the order that
    re-estimates I_h before every step. ``importance``: (I_h of the unpruned model, the function
    that estimates it under gates)."""
    pool = heads_of(model)
    first, estimate = importance
    orders = {"importance": order_by_importance(first, pool), "ablation": order_by_ablation(effects, pool)}
    orders.update({f"random {s}": random_order(pool, seed + s) for s in range(random_orders)})
    out = [pruning_curves(model, orders, score, step=step, desc=name)]
    if reestimate:
        again = lambda m, gates: estimate(m, gates=gates)
        out.append(reestimated_curve(model, pool, again, score, step=step)[0].assign(order="re-estimated"))
    return pd.concat(out, ignore_index=True).assign(model=name)


@dataclass
class PruningRuns:
    """Chapter 06's setting: which sets score, rank and ablate, and how the orders are made."""

    sweeps: HeadSweeps
    classifier: str
    classifier_split: str
    translation: str
    translation_split: str
    importance_split: str = "train"
    importance_examples: int = 1000
    max_examples: int = 0
    ablation_examples: int = 0
    random_orders: int = 3
    reestimate: bool = False
    step: float = 0.1
    seed: int = 0
    _loaded: dict = field(default_factory=dict, repr=False)

    def _sets(self, name: str, scored: str) -> tuple[list, list, list]:
        data = self.sweeps.data(name)
        return (course.subset(data[scored], self.max_examples), course.subset(data[self.importance_split], self.importance_examples),
                course.subset(data[scored], self.ablation_examples))

    def _model(self, name: str, run: str) -> tuple:
        """(model, tokenizer or None, classifier scorers or None) of a run, loaded once."""
        key = ("model", run)
        if key not in self._loaded:
            settings = self.sweeps.settings
            if name == self.classifier:
                scored, _, _ = self._sets(name, self.classifier_split)
                model, tokenizer = course.load_classifier(settings, run)
                scorers = classifier_scorers(tokenizer, scored, ["accuracy", "log_likelihood"], settings.max_length(name))
                self._loaded[key] = model, tokenizer, scorers
            else:
                self._loaded[key] = course.load_translation(settings, run), None, None
        return self._loaded[key]

    def _loaded_run(self, name: str, run: str):
        """(model, tokenizer, (I_h, its estimator)) of a run, loaded and estimated once."""
        if run not in self._loaded:
            model, tokenizer, _ = self._model(name, run)
            if name == self.classifier:
                _, ranked, _ = self._sets(name, self.classifier_split)
                max_length = self.sweeps.settings.max_length(name)
                estimate = lambda m, **kw: classifier_importance(m, tokenizer, ranked, max_length, **kw)
            else:
                _, ranked, _ = self._sets(name, self.translation_split)
                estimate = lambda m, **kw: translation_importance(m, ranked, **kw)
            self._loaded[run] = model, tokenizer, (estimate(model), estimate)
        return self._loaded[run]

    def scored_run(self, name: str, run: str, measure: str) -> tuple:
        """(model, tokenizer or None, score): a run and the scorer of ``measure`` ("metric" or
        "likelihood") on the scored set, as the curves use them (``score.many`` scores head specs)."""
        model, tokenizer, scorers = self._model(name, run)
        if name == self.classifier:
            return model, tokenizer, scorers["accuracy" if measure == "metric" else "log_likelihood"]
        scored, _, _ = self._sets(name, self.translation_split)
        if measure == "metric":
            return model, None, translation_scorer(self.sweeps.decoded(scored), beam=self.sweeps.beam,
                                                   max_len_b=self.sweeps.max_len_b)
        return model, None, translation_likelihood_scorer(scored)   # teacher-forced per reference token: no decoding

    def curves(self, name: str, measure: str = "metric") -> pd.DataFrame:
        """Every training run's pruning curves of model ``name`` (the classifier or the
        translation model), scored on ``measure`` ("metric" or "likelihood"), with ``track``."""
        track = "classifier" if name == self.classifier else "translation"
        scored_split = self.classifier_split if track == "classifier" else self.translation_split
        _, _, ablation_set = self._sets(name, scored_split)
        out = []
        for seed, run in course.seed_runs(self.sweeps.settings, name, self.sweeps.training_seeds):
            model, tokenizer, importance = self._loaded_run(name, run)
            effects = Run(self.sweeps, name, run, seed, model, tokenizer).effects(ablation_set, "one_head", measure)
            score = self.scored_run(name, run, measure)[2]
            out.append(orders_and_curves(name, model, score, importance, effects, self.random_orders, self.seed,
                                         self.step, self.reestimate).assign(training_seed=seed))
        return pd.concat(out, ignore_index=True).assign(track=track)


def summarise(curves: pd.DataFrame, tolerance: dict[str, float],
              extras: Mapping[str, Callable[[pd.DataFrame], float]] | None = None) -> pd.DataFrame:
    """One row per track, model, seed and order (random: the mean of the random orders): the share
    prunable within ``tolerance[track]`` of the unpruned score, the score unpruned, at 50% and
    with every head pruned, and the paper's share beside the importance order's; each of
    ``extras`` (``{column: f(curve)}``) is computed per curve and averaged the same way."""
    rows = []
    for (track, name, training_seed, order), part in curves.groupby(["track", "model", "training_seed", "order"], sort=False):
        rows.append({"track": track, "model": name, "training_seed": training_seed, "order": order,
                     "prunable_share": prunable_share(part, tolerance[track]),
                     "unpruned": part.loc[part["pruned"] == 0, "score"].iloc[0],
                     "at_50%": part.loc[(part["share"] - 0.5).abs().idxmin(), "score"],
                     "all_pruned": part.loc[part["share"] == 1, "score"].iloc[0],
                     **{column: f(part) for column, f in (extras or {}).items()}})
    shares = pd.DataFrame(rows)
    out = (shares.assign(order=shares["order"].where(~shares["order"].str.startswith("random"), "random (mean)"))
           .groupby(["track", "model", "training_seed", "order"], sort=False).mean(numeric_only=True).reset_index())
    out["paper_prunable_share"] = [paper_values.PRUNABLE_SHARE[t] if o == "importance" else None
                                   for t, o in zip(out["track"], out["order"])]
    return out


def by_seed(summary: pd.DataFrame, orders: tuple[str, ...] = ("importance", "ablation")) -> pd.DataFrame:
    """The prunable share of each model and order, one column per seed, and its spread over seeds."""
    part = summary[summary["order"].isin(orders)]
    return (part.pivot(index=["model", "order"], columns="training_seed", values="prunable_share")
            .rename(columns=lambda s: f"seed {int(s)}").assign(spread=lambda t: t.max(axis=1) - t.min(axis=1)))


def facts(metric: pd.DataFrame, likelihood: pd.DataFrame) -> str:
    """Per measure, model and seed: the shares prunable by each order beside the paper's, and the
    score unpruned and with every head pruned (no verdict: that is the scorecard's)."""
    lines = []
    for measure, table in (("the paper's metric", metric), ("the likelihood", likelihood)):
        for (track, name, training_seed), part in table.groupby(["track", "model", "training_seed"], sort=False):
            share = part.set_index("order")["prunable_share"]
            base, gone = part["unpruned"].iloc[0], part.set_index("order").loc["importance", "all_pruned"]
            lines.append(f"{measure:>18} | {name} seed {int(training_seed)}: {share['importance']:.0%} of heads prunable by "
                         f"importance (paper: {paper_values.PRUNABLE_SHARE[track]:.0%} for "
                         f"{'WMT' if track == 'translation' else 'BERT'}), {share['ablation']:.0%} by ablation, "
                         f"{share['random (mean)']:.0%} at random; score {base:.3g} unpruned, {gone:.3g} with all heads pruned")
    return "\n".join(lines)


def panel(ax, data: pd.DataFrame, title: str, ylabel: str) -> None:
    """Figure 3's panel: the importance, ablation, re-estimated (and L0 gates') curves, the random orders' band."""
    rand = data[data["order"].str.startswith("random")]
    band = rand.groupby("share")["score"].agg(["min", "max", "mean"]).reset_index()
    ax.fill_between(band["share"] * 100, band["min"], band["max"], color="grey", alpha=0.3, label="random (range)")
    styles = {"importance": ("tab:blue", "-"), "ablation": ("tab:green", "--"), "re-estimated": ("tab:purple", ":"),
              "L0 gates": ("tab:red", "-.")}   # chapter 12's fourth method
    for label, (color, dash) in styles.items():
        part = data[data["order"] == label]
        if len(part):
            ax.plot(part["share"] * 100, part["score"], color=color, linestyle=dash, marker="o", markersize=3, label=label)
    ax.set(title=title, xlabel="heads pruned (%)", ylabel=ylabel, xlim=(0, 100))
    ax.legend(fontsize=8)


def figure(curves: pd.DataFrame, panels: list[tuple[str, str, str]], suptitle: str):
    """Figure 3 on the first training run of each model: one ``panel`` per ``(model, title,
    ylabel)`` of ``panels``, side by side. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(12, 4.2))
    for ax, (model, title, ylabel) in zip(axes, panels):
        panel(ax, course.first_seed(curves[curves["model"] == model]), title, ylabel)
    fig.suptitle(suptitle)
    fig.tight_layout()
    return fig
