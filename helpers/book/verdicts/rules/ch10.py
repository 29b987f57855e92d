"""Chapter 10's claims (Appendix B, Figure 6): each further task can lose heads before its score
drops. The rules read ``10_appendix_summary``, one claim per task of the paper's figure."""

from __future__ import annotations

from collections.abc import Callable

from ...paper import values as paper_values
from .. import samples
from ..between_seeds import Value, with_error
from ..engine import SHARE_TOLERANCE, Claim, Results, present, three_way, within

CHAPTER = "10_appendix_more_tasks"


def _paper_task(course_task: str) -> str:
    return paper_values.FIGURE6.set_index("course_task").loc[course_task, "task"]


def flat_start(course_task: str) -> Callable[[Results], tuple[str, str]]:
    def check(r: Results) -> tuple[str, str]:
        table = r["10_appendix_summary"]
        row = present(
            table[table["paper_task"] == _paper_task(course_task)], f"10_appendix_summary: {course_task}"
        ).iloc[0]
        return f"{row['prunable_share']:.0%} ({row['model']})", three_way(
            within(row["prunable_share"], row["paper_flat_until"]), row["prunable_share"] > 0
        )

    return check


def share_statistic(course_task: str) -> Callable[[Results], dict[str, Value]]:
    """``flat_start``'s statistic for the between-seed test: the prunable share with its bootstrap
    standard error over the scored examples (``more_tasks.with_spread``), the rounding error of the
    curve's step and its 5-95% bootstrap range (``between_seeds.Value``)."""

    def statistic(r: Results) -> dict[str, Value]:
        table = r["10_appendix_summary"]
        row = present(
            table[table["paper_task"] == _paper_task(course_task)], f"10_appendix_summary: {course_task}"
        ).iloc[0]
        curves = r["10_appendix_pruning_curves"]
        step = float(curves.loc[curves["task"] == course_task, "step"].max())  # the share's grid
        if step != step:
            raise LookupError(f"the step of {course_task}'s curves")
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
        f"reproduced: prunable share within {SHARE_TOLERANCE:.0%} of the paper's; partly: above 0",
        CHAPTER,
        flat_start(row.course_task),
        likelihood=True,
        sample=curves_sample(row.course_task),
        seed_statistic=share_statistic(row.course_task),
    )
    for row in paper_values.FIGURE6.itertuples()
]
