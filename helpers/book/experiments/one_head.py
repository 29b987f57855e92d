"""§3.2, masking one head at a time: the counts of Table 1's headline, per model, seed and kind.

``counts`` takes each model's stacked one-head effects (``HeadSweeps.effects(..., "one_head")``)
and counts every training run on its own rows (``head_effects.significance_counts``), so no
model's or run's rows reach another's; ``with_paper`` adds the paper's WMT Enc-Enc row
(``from_paper`` True).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ...heads.significance import chance_flag_rate
from ..paper import values as paper_values
from . import equivalence
from .head_effects import significance_counts


def counts(
    models: Sequence[tuple[str, pd.DataFrame]], margins: Mapping[str, float] | None = None, measure: str = "metric"
) -> pd.DataFrame:
    """One row per model, training seed and attention kind: ``heads``, ``layers``, ``significant``,
    ``significant_up``, ``largest_drop``, ``largest_gain`` (``significance_counts``), with
    ``model``, ``training_seed`` and ``from_paper`` (False) first. With ``margins``
    (``equivalence.margin``), also the ``margin`` in the score's unit and the heads of each
    equivalence class (``harmful``, ``negligible``, ``helpful``, ``undetermined``) and those neither
    test places (``unplaced``: not significant and undetermined). ``unit`` names the score's unit
    (accuracy, BLEU or nats), in which ``largest_*`` and ``resolution`` are given."""

    def one(name: str, seed: int, part: pd.DataFrame) -> pd.DataFrame:
        track = "classifier" if set(part["kind"]) == {"self"} else "translation"
        unit = "nats" if measure == "likelihood" else "accuracy" if track == "classifier" else "BLEU"
        table = significance_counts(part).assign(model=name, training_seed=seed, from_paper=False, unit=unit)
        if margins is None:
            return table
        delta = equivalence.margin(track, measure, margins)
        by_kind = [equivalence.placement(rows, delta) for _, rows in part.groupby("kind", sort=False)]
        return pd.concat([table.assign(margin=delta), pd.DataFrame(by_kind, index=table.index)], axis=1)

    out = pd.concat(
        [one(name, s, part) for name, effects in models for s, part in effects.groupby("training_seed")],
        ignore_index=True,
    )
    return out[["model", "training_seed", *out.columns.drop(["model", "training_seed"])]]


def paper_row() -> dict:
    """The paper's count for WMT's encoder self-attention (Table 1: 8 of 96, 4 of them gains)."""
    table1 = paper_values.table(1)
    return {
        "model": "WMT",
        "from_paper": True,
        "kind": "enc_self",
        "heads": 96,
        "layers": 96 // paper_values.HEADS_PER_LAYER["WMT"],
        "significant": paper_values.SIGNIFICANT_ENC_SELF,
        "significant_up": paper_values.SIGNIFICANT_ENC_SELF_UP,
        "largest_drop": table1["delta"].min(),
        "largest_gain": table1["delta"].max(),
    }


def with_paper(ours: pd.DataFrame) -> pd.DataFrame:
    """``ours`` (from ``counts``) with the paper's row below."""
    return pd.concat([ours, pd.DataFrame([paper_row()])], ignore_index=True)


def by_seed(table: pd.DataFrame) -> pd.DataFrame:
    """Our rows of a counts table as ``significant (up) of heads``, one column per training seed."""
    ours = table[~table["from_paper"].astype(bool)]
    cell = (
        ours["significant"].astype(int).astype(str)
        + " ("
        + ours["significant_up"].astype(int).astype(str)
        + " up) of "
        + ours["heads"].astype(int).astype(str)
    )
    return (
        ours.assign(cell=cell)
        .pivot(index=["model", "kind"], columns="training_seed", values="cell")
        .rename(columns=lambda s: f"seed {int(s)}")
    )


def both_measures(metric: pd.DataFrame, likelihood: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The significant counts on the paper's metric and on the likelihood side by side, per model,
    seed and kind, with the count a test at ``alpha`` flags by chance among heads with no effect
    (``chance_flag_rate``: 2·alpha of the heads, since p is taken in the observed direction),
    and (where the tables have them) the heads shown negligible and those neither test places."""
    keys = ["model", "training_seed", "kind"]
    ours = metric[~metric["from_paper"].astype(bool)]
    shown = [c for c in ("significant", "significant_up", "negligible", "unplaced") if c in ours and c in likelihood]
    both = ours[keys + ["heads", *shown]].merge(
        likelihood[keys + shown], on=keys, suffixes=(" (the paper's metric)", " (the likelihood)")
    )
    both.insert(4, "expected by chance", both["heads"] * chance_flag_rate(alpha))
    return both


def base_scores(effects: pd.DataFrame, digits: int) -> str:
    """Each training run's unmasked score, ``"0: 0.7300, 1: 0.7340"`` (``digits`` decimals)."""
    return ", ".join(f"{int(s)}: {b:.{digits}f}" for s, b in effects.groupby("training_seed")["base"].first().items())


def paper_table1() -> pd.DataFrame:
    """The paper's Table 1 as a layer x head grid of ``+0.12*`` cells (``*``: significant)."""
    t1 = paper_values.table(1)
    cells = [f"{d:+.2f}" + ("*" if s else "") for d, s in zip(t1["delta"], t1["significant"])]
    return (
        t1.assign(cell=cells).pivot(index="layer", columns="head", values="cell").rename(index=lambda i: f"layer {i}")
    )


def score_histograms(translation: pd.DataFrame, classifier: pd.DataFrame, titles: tuple[str, str], suptitle: str):
    """Figure 1's two panels: the scores after masking each head alone (one training run's rows
    of ``HeadSweeps.effects``), BLEU stacked by attention kind on the left, accuracy on the right,
    with the unmasked score as a red dashed line. Returns the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    panels = [(translation, "BLEU", {"hue": "kind", "multiple": "stack"}), (classifier, "accuracy", {})]
    for ax, (rows, label, style), title in zip(axes, panels, titles):
        sns.histplot(data=rows, x="score", bins=30, ax=ax, **style)
        ax.axvline(rows["base"].iloc[0], color="red", linestyle="--")
        ax.set(title=title, xlabel=label, ylabel="heads")
    fig.suptitle(suptitle)
    fig.tight_layout()
    return fig
