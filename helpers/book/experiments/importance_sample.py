"""How many examples does head importance need? (the calibration size every
pruning method has to choose.)

From per-example importance terms stored once (``heads.importance.importance_terms``), I_h of
``n`` examples drawn at random is read without another pass (``from_terms``) and compared with
I_h of all of them: Spearman's rank correlation over the heads, and the overlap of the most and
of the least important ``_EDGE`` share of the heads (pruning reads the least important).

    terms = importance_terms(model, batches, loss_fn)
    table = agreement_table(terms, sizes=(4, 16, 64, 256), draws=20, seed=0)
    figure(table, used={"pruning curves (chapter 06)": 1000})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...heads.importance import from_terms

_EDGE = 0.10  # the top and bottom share of the heads whose overlap is read
RISE = "perplexity rise at"  # curve-point columns of a language model (``rise_column``)


def _flat_scores(scores: Mapping[str, torch.Tensor]) -> np.ndarray:
    """Every head's score, kinds in their order, as one vector (heads that were never there: none)."""
    return np.concatenate([t.flatten().numpy() for t in scores.values()])


def edge_overlap(a: np.ndarray, b: np.ndarray, share: float = _EDGE, top: bool = False) -> float:
    """The share of ``a``'s least (``top``: most) important ``share`` of the heads that ``b`` also
    puts there; ties broken by position, as ``argsort`` is stable."""
    k = max(1, int(round(share * len(a))))
    pick = (
        (lambda s: set(np.argsort(-s, kind="stable")[:k]))
        if top
        else (lambda s: set(np.argsort(s, kind="stable")[:k]))
    )
    return len(pick(a) & pick(b)) / k


def rise_column(share: float) -> str:
    """The column of a language model's perplexity rise (%) with ``share`` of its query heads
    pruned: ``"perplexity rise at 10% pruned (%)"``."""
    return f"{RISE} {share:.0%} pruned (%)"


def agreement_table(
    terms: Mapping[str, torch.Tensor],
    sizes: Sequence[int],
    *,
    draws: int,
    seed: int = 0,
    share: float = _EDGE,
    prunable: Callable[[dict[str, torch.Tensor]], float] | None = None,
    curve_draws: int = 0,
    curve_points: Callable[[dict[str, torch.Tensor]], Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """One row per sample size ``n`` (at most the examples there are; all of them once) and
    draw: ``examples`` n, ``draw``, ``spearman`` with I_h of every example, and ``top overlap``
    and ``bottom overlap`` (``edge_overlap`` at ``share``). Draws are without replacement,
    ``seed`` fixing them. With ``prunable`` (I_h -> the share a pruning curve in that order
    keeps within its tolerance), the first ``curve_draws`` draws of each size also get
    ``prunable_share``: how far the pruning verdict moves with the sample I_h is estimated on.
    ``curve_points`` (I_h -> ``{column: value}``, e.g. the score at a few steps of the curve in
    that order) adds its columns to the same draws, for a model whose prunable share says little."""
    from scipy.stats import spearmanr

    total = len(next(iter(terms.values())))
    whole = _flat_scores(from_terms(terms))
    rng = np.random.default_rng(seed)
    rows = []
    for n in sorted({min(int(s), total) for s in sizes}):
        for draw in range(1 if n == total else draws):
            picked = np.sort(rng.choice(total, size=n, replace=False))
            scores = from_terms(terms, picked.tolist())
            part = _flat_scores(scores)
            rows.append(
                {
                    "examples": n,
                    "draw": draw,
                    "spearman": float(spearmanr(part, whole).statistic),
                    "top overlap": edge_overlap(whole, part, share, top=True),
                    "bottom overlap": edge_overlap(whole, part, share),
                    "prunable_share": prunable(scores) if prunable and draw < curve_draws else np.nan,
                    **(curve_points(scores) if curve_points and draw < curve_draws else {}),
                }
            )
    return pd.DataFrame(rows)


SUMMARY = "06_importance_sample_summary"  # ``summary`` of chapter 06's draws, as it saves it
_AGREEMENTS = ["spearman", "top overlap", "bottom overlap"]


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per model (where the table has a ``model`` column) and sample size (``examples``): ``used``
    (the examples the verdict used, where the table has it), ``draws``, the median of each
    agreement over the draws with its 5th and 95th percentiles (``spearman (median)``,
    ``spearman (5%)``, ...), and for each drawn curve's column (``prunable_share``, the
    perplexity rises: ``RISE``) that has values, its ``(min)``, ``(max)`` and ``(draws)`` over the
    draws that have one."""
    keys = [c for c in ("model", "examples") if c in table]
    grouped = table.groupby(keys, sort=False)
    out = grouped[_AGREEMENTS].quantile([0.05, 0.5, 0.95]).unstack()
    out.columns = [f"{measure} ({'median' if q == 0.5 else f'{q:.0%}'})" for measure, q in out.columns]
    out.insert(0, "draws", grouped.size())
    if "used" in table:
        out.insert(0, "used", grouped["used"].first())
    for column in [c for c in table if c == "prunable_share" or c.startswith(RISE)]:
        if table[column].notna().any():
            out[f"{column} (min)"] = grouped[column].min()
            out[f"{column} (max)"] = grouped[column].max()
            out[f"{column} (draws)"] = grouped[column].count()
    return out.reset_index().sort_values(keys, kind="stable").reset_index(drop=True)


def figure(table: pd.DataFrame, used: Mapping[str, int] | None = None):
    """Spearman and bottom overlap against the sample size (log scale), one line per model with its
    5-95% band over the draws; ``used``: ``{what: examples}`` marked as vertical lines (the sample
    each pruning verdict's importance rests on)."""
    import matplotlib.pyplot as plt

    table = table if "model" in table else table.assign(model="model")
    curves = table.dropna(subset=["prunable_share"]) if "prunable_share" in table else table.iloc[:0]
    rises = [c for c in table.columns if c.startswith(RISE) and table[c].notna().any()]
    panels = 2 + bool(len(curves)) + bool(rises)
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 3.8))
    if len(curves):
        _prunable_panel(axes[2], curves)
    if rises:
        _rise_panel(axes[-1], table, rises)
    for ax, measure in zip(axes, ("spearman", "bottom overlap")):
        for model, part in table.groupby("model", sort=False):
            q = part.groupby("examples")[measure].quantile([0.05, 0.5, 0.95]).unstack()
            line = ax.plot(q.index, q[0.5], marker="o", label=model)[0]
            ax.fill_between(q.index, q[0.05], q[0.95], color=line.get_color(), alpha=0.2)
        for i, (what, n) in enumerate((used or {}).items()):
            ax.axvline(n, color="grey", linestyle=":", linewidth=1)
            if measure == "spearman":
                ax.annotate(
                    what,
                    (n, 0.02 + 0.08 * i),
                    xycoords=("data", "axes fraction"),
                    fontsize=7,
                    rotation=90,
                    ha="right",
                    va="bottom",
                    color="grey",
                )
        ax.set(
            xscale="log",
            xlabel="examples importance is estimated on",
            ylim=(0, 1.02),
            ylabel=measure if measure == "spearman" else f"least important {_EDGE:.0%}: share also found",
            title=f"{measure} with I_h of every example",
        )
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _prunable_panel(ax, curves: pd.DataFrame) -> None:
    """The share prunable on the likelihood when pruning by I_h from n examples: each draw a dot,
    the median a line, per model."""
    for model, part in curves.groupby("model", sort=False):
        median = part.groupby("examples")["prunable_share"].median()
        line = ax.plot(median.index, median * 100, label=model)[0]
        ax.scatter(part["examples"], part["prunable_share"] * 100, color=line.get_color(), s=12, alpha=0.6)
    ax.set(
        xscale="log",
        xlabel="examples importance is estimated on",
        ylabel="heads prunable (%, likelihood)",
        title="pruning by that I_h: share within perplexity +1%",
    )
    ax.legend(fontsize=8)


def _rise_panel(ax, table: pd.DataFrame, columns: Sequence[str]) -> None:
    """The perplexity rise when pruning a language model by I_h from n examples, one line per
    share pruned (``columns``): each draw a dot, the median a line."""
    for column in columns:
        part = table.dropna(subset=[column])
        for model, rows in part.groupby("model", sort=False):
            median = rows.groupby("examples")[column].median()
            label = column.removeprefix(RISE).removesuffix(" (%)").strip()
            line = ax.plot(median.index, median, label=f"{model}: {label}")[0]
            ax.scatter(rows["examples"], rows[column], color=line.get_color(), s=12, alpha=0.6)
    ax.set(
        xscale="log",
        xlabel="examples importance is estimated on",
        ylabel="perplexity rise (%)",
        title="pruning by that I_h: perplexity rise",
    )
    ax.legend(fontsize=8)
