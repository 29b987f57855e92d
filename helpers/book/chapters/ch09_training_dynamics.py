"""Chapter 09, training dynamics: its experiment, the rules that judge its claims and its findings in words.

§6, when unimportant heads appear during training (Figure 5): each saved checkpoint of the
translation model pruned by its own I_h, scored by BLEU and by likelihood, on every run.

Chapter 09's claims (§6, Figure 5): early in training, pruning 40% of the heads hurts; later it
costs little. The rules read ``09_importance_dynamics``, on the epochs with a usable BLEU
(``usable_epochs``, parameter ``min_base_share``).

``findings``: chapter 09's "What this run shows" paragraph.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ...heads.gates import heads_of
from ...heads.significance import Bootstrap
from ...sweeps.curve_spread import step_errors
from ...sweeps.pruning_curves import order_by_importance, pruning_curve
from ...zoo.scorers import translation_importance
from .. import course
from ..experiments.pruning_runs import resampled_steps
from ..paper import values as paper_values
from ..profiles import Profile
from ..store.results import ChapterTables
from ..verdicts import samples
from ..verdicts.between_seeds import NotTestable, Value, with_error
from ..verdicts.engine import CANNOT_TELL, Claim, Results, three_way
from ..verdicts.pooling import Pooled, mean_over_seeds, over_interval, supported
from ..verdicts.text import words

_MIN_BASE_SHARE = 0.02  # the default: epochs whose unpruned BLEU is below this share of the last one's are skipped


def usable_epochs(run: pd.DataFrame, min_base_share: float = _MIN_BASE_SHARE) -> list[int]:
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
    *,
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
    (``pruning_runs.resampled_steps``, ``bootstrap.n_resamples`` resamples)."""
    likelihood_rows = []

    def run_seed(training_seed: int, run: str) -> pd.DataFrame:
        rows = []
        for epoch in epochs:
            model = course.load_translation(settings, run, epoch=epoch)
            order = order_by_importance(translation_importance(model, importance_pairs), heads_of(model))
            curve = pruning_curve(model, order, score, step=step, desc=f"seed {training_seed}, epoch {epoch}")
            base = curve.loc[curve["pruned"] == 0, "score"].iloc[0]
            _, resampled = resampled_steps(model, order, score=score, step=step, bootstrap=bootstrap)
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
            _, resampled = resampled_steps(model, order, score=likelihood, step=step, bootstrap=bootstrap)
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


CHAPTER = "09_training_dynamics"
_CURVES = "09_importance_dynamics"


class _NoUsableBLEU(ValueError):
    """A claim on BLEU's share kept, where no checkpoint has a BLEU to keep a share of."""


def _runs(r: Results) -> list[pd.DataFrame]:
    """The curves of each training run (seed) in ``r``."""
    d = r[_CURVES]
    if "training_seed" not in d:
        return [d]
    return [part for _, part in d.groupby("training_seed", sort=True)]


def _at_40(run: pd.DataFrame, column: str, epoch: int) -> tuple[float, float]:
    """``column`` with 40% pruned at ``epoch`` of one run, with its bootstrap standard error
    (``<column>_se``; NaN where the table has none)."""
    value = at_share_by_epoch(run, column).loc[epoch]
    se = at_share_by_epoch(run, f"{column}_se").loc[epoch] if f"{column}_se" in run else float("nan")
    return float(value), float(se)


def _relative(r: Results, which: int) -> tuple[Pooled, list[int]]:
    """The share of the BLEU left with 40% pruned at each run's first (``which`` 0) or last (-1)
    epoch with a usable BLEU (``usable_epochs``), pooled over the runs; and those epochs."""
    found, epochs = [], []
    for run in _runs(r):
        usable = usable_epochs(run, r.params.get("min_base_share", _MIN_BASE_SHARE))
        if not usable:
            raise _NoUsableBLEU("no checkpoint has a usable BLEU")
        epochs.append(usable[which])
        found.append(_at_40(run, "relative", usable[which]))
    return mean_over_seeds([v for v, _ in found], [e for _, e in found]), epochs


def _epochs(epochs: list[int]) -> str:
    return f"epoch {epochs[0]}" if len(set(epochs)) == 1 else f"epochs {', '.join(map(str, epochs))}"


def _seeds(r: Results) -> str:
    return f" ({len(r.seeds)} seeds pooled)" if len(r.seeds) > 1 else ""


def early_hurts(r: Results) -> tuple[str, str]:
    """Under 85% of the BLEU left at the first usable epoch (partly: under 95%), pooled over the
    seeds and read over its interval. No usable BLEU: cannot tell."""
    try:
        rel, epochs = _relative(r, 0)
    except _NoUsableBLEU as none:
        return f"({none})", CANNOT_TELL
    low = paper_values.FIGURE5_KEPT_AT_40[0]
    verdict = over_interval(lambda v: three_way(v < low, v < 0.95), rel)
    return f"{rel.text('{:.0%}')} left at {_epochs(epochs)}{_seeds(r)}", verdict


def late_survives(r: Results) -> tuple[str, str]:
    """At least 85% of the BLEU left at the last epoch (partly: 75%), pooled over the seeds and
    read over its interval. No usable BLEU: cannot tell."""
    try:
        rel, epochs = _relative(r, -1)
    except _NoUsableBLEU as none:
        return f"({none})", CANNOT_TELL
    low = paper_values.FIGURE5_KEPT_AT_40[0]
    verdict = over_interval(lambda v: three_way(v >= low, v >= low - 0.1), rel)
    return f"{rel.text('{:.0%}')} left at {_epochs(epochs)}{_seeds(r)}", verdict


def _ratios(r: Results) -> tuple[Pooled, Pooled, Pooled]:
    """The perplexity ratio with 40% pruned at each run's first and last epoch, and the first less
    the last (its error as if the epochs were independent: they share examples, which only makes
    it wider than it is), each pooled over the runs."""
    first, last, gap = [], [], []
    for run in _runs(r):
        epochs = sorted(run["epoch"].unique())
        a, b = _at_40(run, "perplexity_ratio", epochs[0]), _at_40(run, "perplexity_ratio", epochs[-1])
        first.append(a)
        last.append(b)
        gap.append((a[0] - b[0], math.hypot(a[1], b[1])))
    pool = lambda found: mean_over_seeds([v for v, _ in found], [e for _, e in found])
    return pool(first), pool(last), pool(gap)


def _early_hurts_likelihood(r: Results) -> tuple[str, str]:
    """Pruning 40% raises the perplexity more at the first epoch than at the last (the gap's
    interval above 0) and by over 10% (the first ratio's interval above 1.10): reproduced; only
    the first: partly; read over every state the two intervals allow."""
    first, last, gap = _ratios(r)
    more = _possible(gap.low > 0, gap.high <= 0)
    large = _possible(first.low > 1.10, first.high <= 1.10)
    verdict = supported(three_way(m and g, m) for m in more for g in large)
    text = (
        f"perplexity x{first.text()} at the first epoch, x{last.text()} at the last (gap {gap.text('{:+.2f}')})"
        + _seeds(r)
    )
    return text, verdict


def _late_survives_likelihood(r: Results) -> tuple[str, str]:
    _, last, _ = _ratios(r)
    verdict = over_interval(lambda v: three_way(v <= 1.10, v <= 1.25), last)
    return f"perplexity x{last.text()} at the last epoch{_seeds(r)}", verdict


def _possible(surely: bool, surely_not: bool) -> set[bool]:
    """The truth values a condition read on an interval can take."""
    return {True} if surely else {False} if surely_not else {True, False}


def _perplexity_at_40(r: Results) -> pd.Series:
    """The perplexity with 40% pruned relative to the unpruned checkpoint's, by epoch (likelihood;
    one run)."""
    return at_share_by_epoch(r[_CURVES], "perplexity_ratio")


def _relative_at_40(r: Results) -> pd.Series:
    """Relative BLEU with 40% pruned, by epoch, for the epochs with a usable BLEU (one run)."""
    d = r[_CURVES]
    usable = usable_epochs(d, r.params.get("min_base_share", _MIN_BASE_SHARE))
    if not usable:
        raise _NoUsableBLEU("no checkpoint has a usable BLEU")
    return at_share_by_epoch(d, "relative").loc[usable]


def _at_40_with_error(r: Results, column: str, epochs: dict[str, int]) -> dict[str, Value]:
    """``column`` with 40% pruned at each of ``epochs`` (``{role: epoch}``, e.g. the first usable
    one, compared between seeds by role), with its bootstrap standard error (``<column>_se``,
    ``checkpoint_curves``), as the between-seed test's components."""
    table = r[_CURVES]
    if f"{column}_se" not in table:
        raise LookupError(f"{column}_se")
    value, error = at_share_by_epoch(table, column), at_share_by_epoch(table, f"{column}_se")
    return {
        role: with_error(value.loc[e], error, column=e, what=f"{column} at epoch {e}") for role, e in epochs.items()
    }


def seed_statistic(which: str):
    """The claim's statistic per seed, ``which`` epoch of it (``"first"`` or ``"last"``; on the
    likelihood, the early claim reads both): the share of the BLEU left with 40% pruned at the
    first or last usable epoch, or the perplexity ratio there."""

    def statistic(r: Results) -> dict[str, Value]:
        try:
            return _statistic(r)
        except _NoUsableBLEU as none:
            raise NotTestable(f"{none} on one seed") from None

    def _statistic(r: Results) -> dict[str, Value]:
        if r.measure:
            ratio = _perplexity_at_40(r)
            first, last = {"first epoch": ratio.index[0]}, {"last epoch": ratio.index[-1]}
            return _at_40_with_error(r, "perplexity_ratio", {**first, **last} if which == "first" else last)
        rel = _relative_at_40(r)
        return _at_40_with_error(r, "relative", {f"{which} usable epoch": rel.index[0 if which == "first" else -1]})

    return statistic


def curves_sample(r: Results) -> str:
    d = r[_CURVES]
    epochs = ", ".join(str(int(e)) for e in sorted(d["epoch"].unique()))
    return samples.curves(d) + f"; checkpoints at epochs {epochs}" if samples.curves(d) else ""


CLAIMS = [
    Claim(
        "early_hurts",
        "§6, Figure 5",
        "Early in training, pruning 40% of the heads hurts",
        "well under 85% of the BLEU left in epochs 1-2",
        "reproduced: under 85% left at the first epoch with a usable BLEU (at least {min_base_share:.0%} of the last "
        "epoch's); partly: under 95%; read over the 95% interval of the share pooled over the seeds (cannot tell: no "
        "usable BLEU)",
        CHAPTER,
        early_hurts,
        likelihood=_early_hurts_likelihood,
        parameters={"min_base_share": _MIN_BASE_SHARE},
        likelihood_rule="reproduced: 40% pruned raises the perplexity more at the first epoch than at the last, and "
        "by over 10%; partly: more at the first; each read over its 95% interval pooled over the seeds",
        sample=curves_sample,
        seed_statistic=seed_statistic("first"),
    ),
    Claim(
        "late_survives",
        "§6, Figure 5",
        "Later, 40% of the heads can go at little cost (unimportant heads emerge)",
        "85 to 90% of the BLEU left from about epoch 10",
        "reproduced: at least 85% left at the last epoch; partly: at least 75%; read over the 95% interval of the "
        "share pooled over the seeds (cannot tell: no usable BLEU)",
        CHAPTER,
        late_survives,
        likelihood=_late_survives_likelihood,
        parameters={"min_base_share": _MIN_BASE_SHARE},
        likelihood_rule="reproduced: at the last epoch, 40% pruned raises the perplexity by at most 10%; partly: 25%; "
        "read over the 95% interval of the ratio pooled over the seeds",
        sample=curves_sample,
        seed_statistic=seed_statistic("last"),
    ),
]


def findings(tables: ChapterTables, min_base_share: float = _MIN_BASE_SHARE) -> str:
    """Chapter 09's findings: per seed, what pruning 40% costs at the first and the last analysed
    epoch, as a share of the BLEU kept (over the epochs whose unpruned BLEU is at least
    ``min_base_share`` of the last one's, as the chapter's verdict; the others are named) and as the
    perplexity reached, and the first usable epoch that keeps the paper's share."""
    from ..paper.values import FIGURE5_BLEU, FIGURE5_EPOCH_PRUNABLE, FIGURE5_KEPT_AT_40

    bleu = tables["09_importance_dynamics"]
    ll = tables["09_importance_dynamics_likelihood"]

    lines = []
    for seed, run in bleu.groupby("training_seed"):
        bases = run.drop_duplicates("epoch").set_index("epoch")["unpruned"].sort_index()
        usable = usable_epochs(run, min_base_share)
        skipped = [int(e) for e in bases.index if e not in usable]
        ratio = at_share_by_epoch(ll[ll["training_seed"] == seed], "perplexity_ratio")
        text = (
            f"**Seed {int(seed)}.** With 40% of the heads pruned by importance, the perplexity reaches "
            f"x{ratio.iloc[0]:.2f} of the unpruned checkpoint's after epoch {ratio.index[0]}, and "
            f"x{ratio.iloc[-1]:.2f} after epoch {ratio.index[-1]}."
        )
        if skipped:
            text += (
                f" BLEU leaves out epoch{'s' * (len(skipped) > 1)} {words([str(e) for e in skipped])}, whose unpruned "
                f"BLEU is below {min_base_share:.0%} of the last epoch's: a share of a near-zero BLEU is noise."
            )
        if not usable:
            lines.append(text + " No checkpoint has a usable BLEU, so BLEU cannot tell.")
            continue
        kept = at_share_by_epoch(run, "relative").loc[usable]
        first, last = kept.index[0], kept.index[-1]
        if first == last:
            lines.append(
                text + f" Only epoch {first} has a usable BLEU ({bases[first]:.1f}), of which {kept.iloc[0]:.0%} "
                "is kept. So BLEU cannot compare early with late."
            )
            continue
        early_ll, early_bleu = ratio.iloc[0] > ratio.iloc[-1], kept.iloc[0] < kept.iloc[-1]
        lines.append(
            text + f" On greedy BLEU, {kept.iloc[0]:.0%} is kept after epoch {first} (BLEU {bases[first]:.1f}) "
            f"and {kept.iloc[-1]:.0%} after epoch {last} (BLEU {bases[last]:.1f}). Pruning "
            + (
                "cost more at the first of these checkpoints than at the last on both scores."
                if early_ll and early_bleu
                else "cost more at the first of these checkpoints than at the last on the likelihood only."
                if early_ll
                else "cost more at the first of these checkpoints than at the last on BLEU only."
                if early_bleu
                else "did not cost more at the first of these checkpoints than at the last on either score."
            )
            + f" The first of them to keep {FIGURE5_KEPT_AT_40[0]:.0%} with 40% pruned: "
            + (
                f"epoch {next(e for e in kept.index if kept[e] >= FIGURE5_KEPT_AT_40[0])}"
                if (kept >= FIGURE5_KEPT_AT_40[0]).any()
                else "none"
            )
            + f" of {int(bases.index.max())} (the paper: about epoch {FIGURE5_EPOCH_PRUNABLE} of {max(FIGURE5_BLEU)})."
            + " One checkpoint each, no interval: the verdict table above says what the rules make of it."
        )
    return "\n\n".join(lines)
