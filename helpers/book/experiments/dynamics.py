"""§6, when unimportant heads appear during training (Figure 5): each saved checkpoint of the
translation model pruned by its own I_h, scored by BLEU and by likelihood, on every run."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ...heads.significance import Bootstrap
from ...sweeps.curve_spread import step_errors
from ...sweeps.pruning_curves import heads_of, order_by_importance, pruning_curve
from ...zoo.scorers import translation_importance
from .. import course
from ..paper import values as paper_values
from ..profiles import Profile
from .pruning import resampled_steps

MIN_BASE_SHARE = 0.02  # the default: epochs whose unpruned BLEU is below this share of the last one's are skipped


def usable_epochs(run: pd.DataFrame, min_base_share: float = MIN_BASE_SHARE) -> list[int]:
    """The epochs of one training run's chapter-09 table whose unpruned BLEU is above 0 and at
    least ``min_base_share`` of the last epoch's: those a share of the BLEU kept means something."""
    bases = run.drop_duplicates("epoch").set_index("epoch")["unpruned"].sort_index()
    return [int(e) for e, b in bases.items() if b > 0 and b >= min_base_share * bases.iloc[-1]]


def at_share_by_epoch(table: pd.DataFrame, column: str, share: float = 0.4) -> pd.Series:
    """``column`` of each epoch's step nearest ``share`` pruned, by epoch (chapter 09's tables)."""
    near = table.loc[table.groupby("epoch")["share"].apply(lambda s: (s - share).abs().idxmin())]
    return near.set_index("epoch")[column].sort_index()


def checkpoint_curves(
    settings: Profile,
    name: str,
    epochs: Sequence[int],
    importance_pairs: Sequence,
    score: Callable,
    likelihood: Callable,
    step: float,
    training_seeds: int = 0,
    bootstrap: Bootstrap = Bootstrap(),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(BLEU curves, likelihood curves)`` of every checkpoint in ``epochs`` of every run of
    ``name``, pruned by that checkpoint's I_h (estimated on ``importance_pairs``). The BLEU rows
    carry ``unpruned`` and ``relative`` (a share of the unpruned score, undefined at 0); the
    likelihood rows ``unpruned`` and ``perplexity_ratio``, the perplexity relative to the
    unpruned checkpoint's (exp of the drop in log-likelihood per token); ``relative_se`` and
    ``perplexity_ratio_se`` are their bootstrap standard errors over the scored examples
    (``pruning.resampled_steps``, ``bootstrap.n_resamples`` resamples)."""
    likelihood_rows = []

    def run_seed(training_seed: int, run: str) -> pd.DataFrame:
        rows = []
        for epoch in epochs:
            model = course.load_translation(settings, run, epoch=epoch)
            order = order_by_importance(translation_importance(model, importance_pairs), heads_of(model))
            curve = pruning_curve(model, order, score, step=step, desc=f"seed {training_seed}, epoch {epoch}")
            base = curve.loc[curve["pruned"] == 0, "score"].iloc[0]
            _, resampled = resampled_steps(model, order, score, step, bootstrap)
            rows.append(
                curve.assign(
                    epoch=epoch,
                    unpruned=base,
                    relative=curve["score"] / base if base > 0 else float("nan"),
                    relative_se=step_errors(resampled / resampled[:, :1]) if base > 0 else float("nan"),
                    examples=score.examples,
                    step=step,
                )
            )
            ll = pruning_curve(model, order, likelihood, step=step, progress=False)
            ll_base = ll.loc[ll["pruned"] == 0, "score"].iloc[0]
            _, resampled = resampled_steps(model, order, likelihood, step, bootstrap)
            likelihood_rows.append(
                ll.assign(
                    epoch=epoch,
                    unpruned=ll_base,
                    perplexity_ratio=np.exp(ll_base - ll["score"]),
                    perplexity_ratio_se=step_errors(np.exp(resampled[:, :1] - resampled)),
                    training_seed=training_seed,
                    examples=likelihood.examples,
                    step=step,
                )
            )
        return pd.concat(rows, ignore_index=True)

    bleu = course.over_seeds(settings, name, run_seed, training_seeds)
    return bleu, pd.concat(likelihood_rows, ignore_index=True)


def progress_table(bleu: pd.DataFrame, name: str) -> pd.DataFrame:
    """The unpruned BLEU of each checkpoint, ours per seed and the paper's (Figure 5's brackets),
    each with its share of the last checkpoint's BLEU, one column per epoch."""

    def rows(by_epoch: dict, who: str) -> pd.DataFrame:
        final = by_epoch[max(by_epoch)]
        share = (lambda b: f"{b / final:.0%}") if final > 0 else (lambda b: "n/a")  # a model at BLEU 0 has no share
        return pd.DataFrame(
            {"model": who, "epoch": list(by_epoch), "BLEU": [f"{b:.1f} ({share(b)})" for b in by_epoch.values()]}
        )

    ours = [
        rows(run.drop_duplicates("epoch").set_index("epoch")["unpruned"].to_dict(), f"ours ({name}, seed {int(s)})")
        for s, run in bleu.groupby("training_seed")
    ]
    table = pd.concat(ours + [rows(paper_values.FIGURE5_BLEU, "paper (IWSLT)")])
    return table.pivot(index="model", columns="epoch", values="BLEU").fillna("")


def figure(dynamics: pd.DataFrame, right_panel_epochs: list[int], suptitle: str):
    """Figure 5 from one training run's rows of ``checkpoint_curves``: left, the BLEU kept (as a
    share of the unpruned model's) by epoch, one line per share pruned, with each epoch's unpruned
    BLEU under its tick; right, the BLEU kept by share pruned for ``right_panel_epochs``."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    shown = dynamics[dynamics["share"] < 1.0]
    palette = sns.color_palette("viridis", shown["share"].nunique())
    for color, (share, part) in zip(palette, shown.groupby("share")):
        left.plot(part["epoch"], part["relative"] * 100, marker="o", markersize=3, color=color, label=f"{share:.0%}")
    labels = dynamics.drop_duplicates("epoch")
    left.set(
        xscale="log",
        xticks=list(labels["epoch"]),
        xlabel="epoch",
        ylabel="% of the unpruned BLEU",
        ylim=(0, 105),
        title="relative BLEU by epoch, one line per share pruned",
    )
    left.set_xticklabels([f"{e}\n[{b:.1f}]" for e, b in zip(labels["epoch"], labels["unpruned"])], fontsize=8)
    left.legend(title="pruned", fontsize=7, ncol=2)
    for epoch in right_panel_epochs:
        part = dynamics[dynamics["epoch"] == epoch]
        if len(part):
            right.plot(part["share"] * 100, part["relative"] * 100, marker="o", markersize=3, label=f"epoch {epoch}")
    right.set(
        xlabel="heads pruned (%)",
        ylabel="% of the unpruned BLEU",
        ylim=(0, 105),
        xlim=(0, 100),
        title="relative BLEU by share pruned",
    )
    right.legend()
    fig.suptitle(suptitle)
    fig.tight_layout()
    return fig
