"""Appendix B, more tasks (Figure 6): every classifier of the profile and the translation model
pruned by importance, on every training run, scored on the task's metric and by likelihood."""

from __future__ import annotations

import math

import pandas as pd

from ...heads.significance import Bootstrap
from ...sweeps.pruning_curves import heads_of, order_by_importance, prunable_share, pruning_curve
from ...zoo.recipes import CLASSIFIER_TASKS
from ...zoo.scorers import (
    classifier_importance,
    classifier_scorers,
    translation_importance,
    translation_likelihood_scorer,
    translation_scorer,
)
from .. import course
from ..paper import values as paper_values
from ..profiles import Profile
from .pruning import share_spreads, spread_of

TOLERANCE = {
    "BLEU": 1.0,
    "log-likelihood": math.log(1.01),
}  # else 1 point of the metric; the likelihood: perplexity +1%


def classifier_curves(
    settings: Profile,
    name: str,
    split: str,
    importance_split: str,
    importance_examples: int,
    max_examples: int,
    step: float,
    training_seeds: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(metric curves, likelihood curves)`` of every run of classifier ``name`` on ``split``,
    pruned by I_h; both scores come from one pass per pruning step (the label log-probabilities)."""
    spec = settings.model(name)
    metric, max_length = CLASSIFIER_TASKS[spec["task"]], spec["fine_tune"]["max_length"]
    data = course.load_data(settings, name)  # every training run shares its data
    importance_set = course.subset(data[importance_split], importance_examples)
    scored = course.subset(data[split], max_examples)
    likelihood = []

    def measure(training_seed: int, run: str) -> pd.DataFrame:
        model, tokenizer = course.load_classifier(settings, run)
        order = order_by_importance(
            classifier_importance(model, tokenizer, importance_set, max_length), heads_of(model)
        )
        scorers = classifier_scorers(tokenizer, scored, [metric, "log_likelihood"], max_length)
        likelihood.append(
            with_spread(
                pruning_curve(model, order, scorers["log_likelihood"], step=step, progress=False).assign(
                    model=name,
                    task=spec["task"],
                    metric="log-likelihood",
                    training_seed=training_seed,
                    examples=len(scored),
                    step=step,
                ),
                model,
                order,
                scorers["log_likelihood"],
            )
        )
        return with_spread(
            pruning_curve(model, order, scorers[metric], step=step, desc=f"{run}").assign(
                model=name, task=spec["task"], metric=metric, examples=len(scored), step=step
            ),
            model,
            order,
            scorers[metric],
        )

    return course.over_seeds(settings, name, measure, training_seeds), pd.concat(likelihood, ignore_index=True)


def translation_curves(
    settings: Profile,
    name: str,
    split: str,
    importance_split: str,
    importance_examples: int,
    max_examples: int,
    decoded_examples: int,
    beam: int,
    max_len_b: int,
    step: float,
    training_seeds: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(BLEU curves, likelihood curves)`` of every run of translation model ``name``."""
    data = course.load_data(settings, name)
    importance_set = course.subset(data[importance_split], importance_examples)
    scored = course.subset(data[split], max_examples)
    bleu = translation_scorer(course.subset(scored, decoded_examples), beam=beam, max_len_b=max_len_b)
    nll = translation_likelihood_scorer(scored)
    likelihood = []

    def measure(training_seed: int, run: str) -> pd.DataFrame:
        model = course.load_translation(settings, run)
        order = order_by_importance(translation_importance(model, importance_set), heads_of(model))
        likelihood.append(
            with_spread(
                pruning_curve(model, order, nll, step=step, progress=False).assign(
                    model=name,
                    task="translation",
                    metric="log-likelihood",
                    training_seed=training_seed,
                    examples=nll.examples,
                    step=step,
                ),
                model,
                order,
                nll,
            )
        )
        return with_spread(
            pruning_curve(model, order, bleu, step=step, desc=run).assign(
                model=name, task="translation", metric="BLEU", examples=bleu.examples, step=step
            ),
            model,
            order,
            bleu,
        )

    return course.over_seeds(settings, name, measure, training_seeds), pd.concat(likelihood, ignore_index=True)


def tolerance_of(metric: str) -> float:
    """What a prunable share may lose on ``metric``: 1 BLEU, perplexity +1%, else 0.01 of the metric."""
    return TOLERANCE.get(metric, 0.01)


def with_spread(curve: pd.DataFrame, model, order, score, bootstrap: Bootstrap = Bootstrap()) -> pd.DataFrame:
    """``curve`` (one model's, by ``order``, its ``metric`` and ``step`` in columns) with its prunable
    share's sampling error over the scored examples (``pruning.share_spreads``), read from ``score``'s
    kept passes."""
    tolerance = tolerance_of(curve["metric"].iloc[0])
    spread = share_spreads(model, {"importance": order}, score, tolerance, curve["step"].iloc[0], bootstrap)
    return curve.assign(**spread["importance"])


def summarise(curves: pd.DataFrame) -> pd.DataFrame:
    """Per model and seed: the unpruned score, the share prunable within the tolerance (1 BLEU,
    perplexity +1%, else 0.01 of the metric), the score at 90% pruned, beside the paper's task in
    the same role (its unpruned score and where its curve leaves the flat start)."""
    paper = paper_values.FIGURE6.rename(
        columns={"task": "paper_task", "unpruned": "paper_unpruned", "flat_until": "paper_flat_until"}
    ).drop(columns="metric")
    rows = []
    for (name, task, training_seed), part in curves.groupby(["model", "task", "training_seed"], sort=False):
        base = part.loc[part["pruned"] == 0, "score"].iloc[0]
        at90 = part.loc[(part["share"] - 0.9).abs().idxmin(), "score"]
        rows.append(
            {
                "model": name,
                "training_seed": training_seed,
                "course_task": task,
                "metric": part["metric"].iloc[0],
                "unpruned": base,
                "prunable_share": prunable_share(part, tolerance_of(part["metric"].iloc[0])),
                "score_90%_pruned": at90,
                **spread_of(part, tolerance_of(part["metric"].iloc[0])),
            }
        )
    return pd.DataFrame(rows).merge(paper, on="course_task", how="left").drop(columns="course_task")


def figure(curves: pd.DataFrame, profile: str):
    """Figure 6: one panel per model, a line per training seed, the paper's flat stretch dotted."""
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(curves["model"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        part = curves[curves["model"] == name]
        for training_seed, run in part.groupby("training_seed"):
            ax.plot(run["share"] * 100, run["score"], marker="o", markersize=3, label=f"ours, seed {training_seed}")
        paper = paper_values.FIGURE6[paper_values.FIGURE6["course_task"] == part["task"].iloc[0]]
        if len(paper):
            ax.axvline(
                paper["flat_until"].iloc[0] * 100,
                color="grey",
                linestyle=":",
                label=f"paper ({paper['task'].iloc[0]}): flat until",
            )
            ax.legend(fontsize=7)
        ax.set(title=name, xlabel="heads pruned (%)", ylabel=part["metric"].iloc[0], xlim=(0, 100))
    fig.suptitle(f"pruning by importance, more tasks ({profile} profile)")
    fig.tight_layout()
    return fig
