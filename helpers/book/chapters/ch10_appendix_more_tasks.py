"""Chapter 10, appendix more tasks: its experiment, the rules that judge its claims and its findings in words.

Appendix B, more tasks (Figure 6): every classifier of the profile and the translation model
pruned by importance, on every training run, scored on the task's metric and by likelihood.

Chapter 10's claims (Appendix B, Figure 6): each further task can lose heads before its score
drops. The rules read ``10_appendix_summary``, one claim per task of the paper's figure.

``findings``: chapter 10's "What this run shows" paragraph.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from ...heads.gates import heads_of
from ...heads.metrics import BleuDefinition
from ...heads.significance import Bootstrap
from ...sweeps.pruning_curves import order_by_importance, prunable_share, pruning_curve
from ...zoo.recipes import CLASSIFIER_TASKS
from ...zoo.scorers import (
    classifier_importance,
    classifier_scorers,
    translation_importance,
    translation_likelihood_scorer,
    translation_scorer,
)
from .. import course
from ..experiments.pruning_runs import share_spreads, spread_of
from ..paper import values as paper_values
from ..profiles import Profile
from ..store.results import ChapterTables
from ..verdicts import samples
from ..verdicts.between_seeds import Value, with_error
from ..verdicts.engine import SHARE_TOLERANCE, Claim, Results, present, three_way, within
from ..verdicts.pooling import Pooled, mean_over_seeds, over_interval, with_ranges
from ..verdicts.text import percents, share_interval, words

TOLERANCE = {
    "BLEU": 1.0,
    "log-likelihood": math.log(1.01),
}  # else 1 point of the metric; the likelihood: perplexity +1%

BLEU = BleuDefinition()  # the pruning curves score tokenized BLEU, as the authors' prune.py


def classifier_curves(
    settings: Profile,
    name: str,
    *,
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
        scorers = classifier_scorers(tokenizer, scored, metrics=[metric, "log_likelihood"], max_length=max_length)
        likelihood.append(
            _with_spread(
                pruning_curve(model, order, scorers["log_likelihood"], step=step, progress=False).assign(
                    model=name,
                    task=spec["task"],
                    metric="log-likelihood",
                    training_seed=training_seed,
                    examples=len(scored),
                    step=step,
                ),
                model,
                order=order,
                score=scorers["log_likelihood"],
            )
        )
        return _with_spread(
            pruning_curve(model, order, scorers[metric], step=step, desc=f"{run}").assign(
                model=name, task=spec["task"], metric=metric, examples=len(scored), step=step
            ),
            model,
            order=order,
            score=scorers[metric],
        )

    return course.over_seeds(settings, name, measure, training_seeds), pd.concat(likelihood, ignore_index=True)


def translation_curves(
    settings: Profile,
    name: str,
    *,
    split: str,
    importance_split: str,
    importance_examples: int,
    max_examples: int,
    decoded_examples: int,
    beam: int,
    max_len_b: int,
    step: float,
    training_seeds: int = 0,
    max_len_a: float = 0.0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(BLEU curves, likelihood curves)`` of every run of translation model ``name``."""
    data = course.load_data(settings, name)
    importance_set = course.subset(data[importance_split], importance_examples)
    scored = course.subset(data[split], max_examples)
    bleu = translation_scorer(
        course.subset(scored, decoded_examples), beam=beam, max_len_b=max_len_b, max_len_a=max_len_a, definition=BLEU
    )
    nll = translation_likelihood_scorer(scored)
    likelihood = []

    def measure(training_seed: int, run: str) -> pd.DataFrame:
        model = course.load_translation(settings, run)
        order = order_by_importance(translation_importance(model, importance_set), heads_of(model))
        likelihood.append(
            _with_spread(
                pruning_curve(model, order, nll, step=step, progress=False).assign(
                    model=name,
                    task="translation",
                    metric="log-likelihood",
                    training_seed=training_seed,
                    examples=nll.examples,
                    step=step,
                ),
                model,
                order=order,
                score=nll,
            )
        )
        return _with_spread(
            pruning_curve(model, order, bleu, step=step, desc=run).assign(
                model=name, task="translation", metric="BLEU", examples=bleu.examples, step=step
            ),
            model,
            order=order,
            score=bleu,
        )

    return course.over_seeds(settings, name, measure, training_seeds), pd.concat(likelihood, ignore_index=True)


def _tolerance_of(metric: str) -> float:
    """What a prunable share may lose on ``metric``: 1 BLEU, perplexity +1%, else 0.01 of the metric."""
    return TOLERANCE.get(metric, 0.01)


def _with_spread(curve: pd.DataFrame, model, *, order, score, bootstrap: Bootstrap = Bootstrap()) -> pd.DataFrame:
    """``curve`` (one model's, by ``order``, its ``metric`` and ``step`` in columns) with its prunable
    share's sampling error over the scored examples (``pruning_runs.share_spreads``), read from ``score``'s
    kept passes."""
    tolerance = _tolerance_of(curve["metric"].iloc[0])
    spread = share_spreads(
        model, {"importance": order}, score=score, tolerance=tolerance, step=curve["step"].iloc[0], bootstrap=bootstrap
    )
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
                "prunable_share": prunable_share(part, _tolerance_of(part["metric"].iloc[0])),
                "score_90%_pruned": at90,
                **spread_of(part, _tolerance_of(part["metric"].iloc[0])),
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


CHAPTER = "10_appendix_more_tasks"


def _paper_task(course_task: str) -> str:
    return paper_values.FIGURE6.set_index("course_task").loc[course_task, "task"]


def _flat_start(course_task: str) -> Callable[[Results], tuple[str, str]]:
    """The task's prunable share, pooled over the seeds with its interval (its bootstrap error
    over examples, on the curve's grid, widened to hold each seed's bootstrap range:
    ``pooling.with_ranges``; shares lie in [0, 1]); read over the interval: within
    ``SHARE_TOLERANCE`` of where the paper's curve leaves flat is reproduced, above 0 partly."""

    def check(r: Results) -> tuple[str, str]:
        table = r["10_appendix_summary"]
        rows = present(table[table["paper_task"] == _paper_task(course_task)], f"10_appendix_summary: {course_task}")
        pooled = mean_over_seeds(rows["prunable_share"].to_numpy(), rows["share_se"].to_numpy())
        if {"share_low", "share_high"} <= set(rows):  # a step statistic: the seeds' own ranges too
            pooled = with_ranges(pooled, rows["share_low"].tolist(), rows["share_high"].tolist())
        pooled = Pooled(pooled.x, max(pooled.low, 0.0), min(pooled.high, 1.0), pooled.per_seed)
        paper = float(rows["paper_flat_until"].iloc[0])
        verdict = over_interval(lambda v: three_way(within(v, paper), v > 0), pooled)
        seeds = f", {len(r.seeds)} seeds pooled" if len(r.seeds) > 1 else ""
        text = f"{share_interval(pooled.x, pooled.low, pooled.high)} ({rows['model'].iloc[0]}{seeds})"
        return text, verdict

    return check


def _step(r: Results, course_task: str) -> float:
    """The grid of ``course_task``'s curves (a prunable share moves in its steps)."""
    curves = r["10_appendix_pruning_curves"]
    step = float(curves.loc[curves["task"] == course_task, "step"].max())
    if step != step:
        raise LookupError(f"the step of {course_task}'s curves")
    return step


def share_statistic(course_task: str) -> Callable[[Results], dict[str, Value]]:
    """``_flat_start``'s statistic for the between-seed test: the prunable share with its bootstrap
    standard error over the scored examples (``_with_spread``), the rounding error of the
    curve's step and its 5-95% bootstrap range (``between_seeds.Value``)."""

    def statistic(r: Results) -> dict[str, Value]:
        table = r["10_appendix_summary"]
        row = present(
            table[table["paper_task"] == _paper_task(course_task)], f"10_appendix_summary: {course_task}"
        ).iloc[0]
        step = _step(r, course_task)  # the share's grid
        return {
            course_task: with_error(
                row["prunable_share"], row, column="share_se", what=course_task, grain=step, ranged=True
            )
        }

    return statistic


def curves_sample(course_task: str) -> Callable[[Results], str]:
    def sample(r: Results) -> str:
        curves = r["10_appendix_pruning_curves"]
        return samples.curves(curves[curves["task"] == course_task])

    return sample


CLAIMS = [
    Claim(
        f"flat_start_{row.course_task}",
        "App. B",
        f"{row.task} ({row.metric}) can lose heads before its score drops",
        f"flat to about {row.flat_until:.0%}",
        f"reproduced: prunable share within {SHARE_TOLERANCE * 100:.0f} points of the paper's {row.flat_until:.0%}; "
        "partly: above 0; not reproduced: 0; read over the 95% interval of the share pooled over the seeds",
        CHAPTER,
        _flat_start(row.course_task),
        likelihood=True,
        sample=curves_sample(row.course_task),
        seed_statistic=share_statistic(row.course_task),
    )
    for row in paper_values.FIGURE6.itertuples()
]


def findings(tables: ChapterTables) -> str:
    """Chapter 10's findings: per task, the share prunable within tolerance on every seed, on the
    task's metric and on the likelihood, beside the paper's flat stretch, and the score left with
    90% of the heads pruned."""
    bleu = tables["10_appendix_summary"]
    ll = tables["10_appendix_summary_likelihood"]
    lines = []
    for model, part in bleu.groupby("model", sort=False):
        mine = ll[ll["model"] == model].sort_values("training_seed")
        part = part.sort_values("training_seed")
        paper = part["paper_flat_until"].iloc[0]
        versus = "" if pd.isna(paper) else f" (the paper's {part['paper_task'].iloc[0]}: flat to about {paper:.0%})"
        lines.append(
            f"**{model}:** {percents(part['prunable_share'])} of the heads can go within the tolerance on "
            f"{part['metric'].iloc[0]}, {percents(mine['prunable_share'])} with the perplexity within 1%"
            f"{versus}. With 90% pruned the score is {words([f'{v:.3g}' for v in part['score_90%_pruned']])}, "
            f"against {words([f'{v:.3g}' for v in part['unpruned']])} unpruned."
        )
    return "\n\n".join(lines)
