"""Chapter 10's claims (Appendix B, Figure 6): each further task can lose heads before its score
drops. The rules read ``10_appendix_summary``, one claim per task of the paper's figure."""

from __future__ import annotations

from collections.abc import Callable

from ...paper import values as paper_values
from .. import samples
from ..between_seeds import Value, with_error
from ..engine import SHARE_TOLERANCE, Claim, Results, present, three_way, within
from ..pooling import Pooled, mean_over_seeds, over_interval, with_ranges

CHAPTER = "10_appendix_more_tasks"


def _paper_task(course_task: str) -> str:
    return paper_values.FIGURE6.set_index("course_task").loc[course_task, "task"]


def flat_start(course_task: str) -> Callable[[Results], tuple[str, str]]:
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
        text = f"{pooled.x:.0%} [{pooled.low:.0%}, {pooled.high:.0%}] ({rows['model'].iloc[0]}{seeds})"
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
    """``flat_start``'s statistic for the between-seed test: the prunable share with its bootstrap
    standard error over the scored examples (``more_tasks.with_spread``), the rounding error of the
    curve's step and its 5-95% bootstrap range (``between_seeds.Value``)."""

    def statistic(r: Results) -> dict[str, Value]:
        table = r["10_appendix_summary"]
        row = present(
            table[table["paper_task"] == _paper_task(course_task)], f"10_appendix_summary: {course_task}"
        ).iloc[0]
        step = _step(r, course_task)  # the share's grid
        return {course_task: with_error(row["prunable_share"], row, "share_se", course_task, grain=step, ranged=True)}

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
        f"reproduced: prunable share within {SHARE_TOLERANCE:.0%} of the paper's; partly: above 0; read over the 95% "
        "interval of the share pooled over the seeds",
        CHAPTER,
        flat_start(row.course_task),
        likelihood=True,
        sample=curves_sample(row.course_task),
        seed_statistic=share_statistic(row.course_task),
    )
    for row in paper_values.FIGURE6.itertuples()
]
