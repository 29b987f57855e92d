"""Chapter 05, cross domain: its experiment, the rules that judge its claims and its findings in words.

§3.4, does a head's effect in domain predict its effect out of domain (Figure 2)?

``run`` sweeps every head of one training run on the in-domain and the out-of-domain set and
keeps both effect tables; ``pairs`` pairs them per head (``head_effects.paired_scores``);
``correlations`` gives, per model and seed, Pearson's r between the two (all heads pooled
beside the paper's r, then per attention kind), with the split-half r of each set, which bounds
what a cross-domain r can show, and the spread of the scores in each domain.

Chapter 05's claim (§3.4, Figure 2): a head's effect in domain predicts its effect out of
domain. The rule reads the heads' changes in and out of domain (``05_cross_domain_translation``,
``05_cross_domain_classifier``), the same rows ``05_cross_domain_r`` summarises.

``findings``: chapter 05's "What this run shows" paragraph.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import course
from ..experiments.head_effects import correlation, paired_scores
from ..experiments.sweeps import HeadSweeps
from ..paper import values as paper_values
from ..store import measures
from ..store.results import ChapterTables
from ..verdicts import samples
from ..verdicts.between_seeds import Pairs
from ..verdicts.engine import Claim, Results, three_way
from ..verdicts.pooling import supported
from ..verdicts.text import MEASURES, r_text, words

_TRACKS = {"translation": "translation", "classifier": "classifier"}  # paper_values.CROSS_DOMAIN_R's keys
UNITS = {"translation": "BLEU", "classifier": "accuracy"}  # each track's metric, as Figure 2 labels it
_SCORED_ON = tuple(measures.BY_KEY)  # the measures each sweep is scored on


def sets(sweeps: HeadSweeps, name: str, splits: tuple[str, str], sizes: tuple[int, int]) -> tuple[list, list]:
    """``(in-domain, out-of-domain)`` examples of model ``name``: ``sizes[i]`` of split
    ``splits[i]``, drawn at random (0: the whole split); every training run shares them."""
    data = sweeps.data(name)
    return tuple(course.subset(data[split], n) for split, n in zip(splits, sizes))


def effects(
    sweeps: HeadSweeps, name: str, sets: tuple[Sequence, Sequence], measure: str = "metric"
) -> dict[int, tuple[pd.DataFrame, pd.DataFrame]]:
    """``{training seed: (in-domain effects, out-of-domain effects)}`` of every head alone."""
    return {
        run.seed: tuple(run.effects(part, "one_head", measure=measure) for part in sets) for run in sweeps.runs(name)
    }


def pairs(by_seed: dict[int, tuple[pd.DataFrame, pd.DataFrame]]) -> pd.DataFrame:
    """The in- and out-of-domain scores per head, every seed stacked (``training_seed``)."""
    return pd.concat(
        [paired_scores(inside, outside).assign(training_seed=seed) for seed, (inside, outside) in by_seed.items()],
        ignore_index=True,
    )


def _row(
    model: str,
    kind: str,
    *,
    paired: pd.DataFrame,
    inside: pd.DataFrame,
    outside: pd.DataFrame,
    seed: int,
    paper_r: float | None = None,
) -> dict:
    r, p = correlation(paired)
    return {
        "model": model,
        "training_seed": seed,
        "kind": kind,
        "heads": len(paired),
        "pearson_r": r,
        "p_value": p,
        "paper_r": paper_r,
        "split_half_r_in": correlation(inside, "score_even", "score_odd")[0],
        "split_half_r_out": correlation(outside, "score_even", "score_odd")[0],
        "spread_in": paired["score_in"].max() - paired["score_in"].min(),
        "spread_out": paired["score_out"].max() - paired["score_out"].min(),
    }


def correlations(models: Sequence[tuple[str, str, dict]]) -> pd.DataFrame:
    """One row per model, seed and kind (``all`` pooled for a translation model, its one kind for
    a classifier, with the paper's r) and then per attention kind of a translation model.
    ``models``: (name, track: "translation" or "classifier", ``effects``' result)."""
    rows = []
    for name, track, by_seed in models:
        paper_r = paper_values.CROSS_DOMAIN_R[_TRACKS[track]]
        for seed, (inside, outside) in by_seed.items():
            paired = paired_scores(inside, outside)
            if track == "classifier":
                rows.append(
                    _row(name, "self", paired=paired, inside=inside, outside=outside, seed=seed, paper_r=paper_r)
                )
                continue
            rows.append(_row(name, "all", paired=paired, inside=inside, outside=outside, seed=seed, paper_r=paper_r))
            rows += [
                _row(
                    name,
                    kind,
                    paired=part,
                    inside=inside[inside["kind"] == kind],
                    outside=outside[outside["kind"] == kind],
                    seed=seed,
                )
                for kind, part in paired.groupby("kind", sort=False)
            ]
    return pd.DataFrame(rows)


def label_shifts(
    sweeps: HeadSweeps, name: str, sets: tuple[Sequence, Sequence], names: tuple[str, str]
) -> pd.DataFrame:
    """Where a classifier's heads move its predictions: per training run, head and set (named
    ``names``), the accuracy change when the head is masked alone, the change in the share of
    the examples predicted as each label (``shift <label>``) and in each label's recall (the
    share of its gold examples predicted right, ``recall change <label>``), beside each set's gold shares
    (``gold <label>``) and the unmasked model's predicted shares (``predicted <label>``). A head
    that pushes predictions toward a label gains where that label is common and loses where it
    is rare, whatever it knows of either domain."""
    from ...sweeps.ablation import UNMASKED, one_head_configs

    rows = []
    for run in sweeps.runs(name):
        configs = one_head_configs(run.model)
        for examples, set_name in zip(sets, names):
            get = sweeps.label_log_probs(run, examples, configs)
            gold = np.asarray([e.label for e in examples])
            labels = range(np.asarray(get(UNMASKED)).shape[1])
            base = np.asarray(get(UNMASKED)).argmax(1)
            fixed = {
                "training_seed": run.seed,
                "set": set_name,
                **{f"gold {k}": float(np.mean(gold == k)) for k in labels},
                **{f"predicted {k}": float(np.mean(base == k)) for k in labels},
            }
            for config in configs:
                masked = np.asarray(get(config)).argmax(1)
                kind, layer, heads = config
                rows.append(
                    {
                        **fixed,
                        "kind": kind,
                        "layer": layer,
                        "head": heads[0],
                        "accuracy change": float(np.mean(masked == gold) - np.mean(base == gold)),
                        **{f"shift {k}": float(np.mean(masked == k) - np.mean(base == k)) for k in labels},
                        **{
                            f"recall change {k}": float(
                                np.mean(masked[gold == k] == k) - np.mean(base[gold == k] == k)
                            )
                            for k in labels
                        },
                    }
                )
    return pd.DataFrame(rows)


_ALIKE_LEVEL = 0.01  # a class "moves alike" in both domains when its own r is positive with p below this


def class_by_class(shifts: pd.DataFrame) -> pd.DataFrame:
    """Per training seed (``label_shifts`` of two sets, the first in domain): Pearson r across
    domains of the heads' accuracy changes, and class by class of their recall changes: one r per
    label that moves in both domains (``class r (<label>)``, ``class p (<label>)``), each over the
    heads (n = ``heads``); ``classes alike``: every such r positive with p < ``_ALIKE_LEVEL``
    (``weakest class r`` and its p beside it); the r between the two labels whose recall the
    heads trade most (in domain), and which labels those are. An accuracy change is the
    gold-share-weighted sum of the recall changes (``recall_sum_gap`` checks it); where heads
    move predictions from one label to another, it is the small net of a large trade, and its
    sign can differ between domains while every class moves alike.

    The classes are correlated one at a time: stacking every label's changes into one r over
    ``classes * heads`` points would let the gap between the labels' means (heads that shift
    every label in a common direction) make r large where no class's heads agree across domains."""
    rows = []
    names = list(dict.fromkeys(shifts["set"]))
    for seed, part in shifts.groupby("training_seed"):
        inside, outside = (part[part["set"] == n].reset_index(drop=True) for n in names)
        recalls = [c for c in part if c.startswith("recall change ") and inside[c].std() > 0 and outside[c].std() > 0]
        traded = list(inside[recalls].std().sort_values(ascending=False).index[:2])
        accuracy = _pearson(inside["accuracy change"], outside["accuracy change"])
        per_class = {c.removeprefix("recall change "): _pearson(inside[c], outside[c]) for c in recalls}
        weakest = min(per_class, key=lambda c: per_class[c][0], default=None)
        rows.append(
            {
                "training_seed": int(seed),
                "heads": len(inside),
                "accuracy r": accuracy[0],
                "accuracy p": accuracy[1],
                "classes": len(recalls),
                "classes alike": bool(per_class) and all(r > 0 and p < _ALIKE_LEVEL for r, p in per_class.values()),
                "weakest class r": per_class[weakest][0] if weakest is not None else np.nan,
                "weakest class p": per_class[weakest][1] if weakest is not None else np.nan,
                "traded labels": " and ".join(c.removeprefix("recall change ") for c in traded),
                "trade r (in domain)": _pearson(inside[traded[0]], inside[traded[1]])[0]
                if len(traded) == 2
                else np.nan,
                **{f"class r ({label})": r for label, (r, _) in per_class.items()},
                **{f"class p ({label})": p for label, (_, p) in per_class.items()},
            }
        )
    return pd.DataFrame(rows)


def _pearson(x, y) -> tuple[float, float]:
    """``head_effects.correlation`` of two sequences: Pearson r and its two-sided p; (nan, nan)
    where either side does not vary."""
    return correlation(pd.DataFrame({"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float)}), "x", "y")


def lowest_seed(by_class: pd.DataFrame) -> int:
    """The training seed of ``class_by_class`` with the lowest accuracy r (the first seed where
    no r is defined: a model whose accuracy no head moves)."""
    r = by_class.set_index("training_seed")["accuracy r"]
    return int(r.idxmin()) if r.notna().any() else int(r.index[0])


def recall_sum_gap(shifts: pd.DataFrame) -> float:
    """The largest gap between a head's accuracy change and the gold-share-weighted sum of its
    recall changes (0 up to rounding: the identity ``class_by_class`` rests on)."""
    recalls = [c for c in shifts if c.startswith("recall change ")]
    total = sum(shifts[f"gold {c.removeprefix('recall change ')}"] * shifts[c] for c in recalls)
    return float((total - shifts["accuracy change"]).abs().max())


def class_figure(shifts: pd.DataFrame, model: str):
    """For the seed with the lowest accuracy r (``lowest_seed``): each head's accuracy change in
    against out of domain (left), and its recall change per class (right), one colour per label."""
    import matplotlib.pyplot as plt

    seed = lowest_seed(class_by_class(shifts))
    part = shifts[shifts["training_seed"] == seed]
    names = list(dict.fromkeys(part["set"]))
    title = f"{model}, training seed {seed}: each head masked alone, {names[0]} against {names[1]}"
    inside, outside = (part[part["set"] == n].reset_index(drop=True) for n in names)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    axes[0].scatter(inside["accuracy change"] * 100, outside["accuracy change"] * 100, s=18, color="grey")
    axes[0].set(title="accuracy change", xlabel=f"{names[0]} (points)", ylabel=f"{names[1]} (points)")
    for c in (c for c in part if c.startswith("recall change ")):
        axes[1].scatter(inside[c] * 100, outside[c] * 100, s=18, label=f"label {c.removeprefix('recall change ')}")
    axes[1].set(title="recall change, per gold label", xlabel=f"{names[0]} (points)", ylabel=f"{names[1]} (points)")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.axhline(0, color="black", linewidth=0.5)
        ax.axvline(0, color="black", linewidth=0.5)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def pooled_by_seed(table: pd.DataFrame) -> pd.DataFrame:
    """The pooled r of each model, one column per seed, with its spread over seeds and the paper's."""
    pooled = table[table["paper_r"].notna()]
    return (
        pooled.pivot(index="model", columns="training_seed", values="pearson_r")
        .rename(columns=lambda s: f"seed {int(s)}")
        .assign(spread=lambda t: t.max(axis=1) - t.min(axis=1), paper=pooled.groupby("model")["paper_r"].first())
    )


def both_measures(metric: pd.DataFrame, likelihood: pd.DataFrame) -> pd.DataFrame:
    """The pooled correlations and split-half r on the paper's metric and on the likelihood."""
    keys = ["model", "training_seed", "kind"]
    side = metric[keys + ["pearson_r", "split_half_r_in", "split_half_r_out"]].merge(
        likelihood[keys + ["pearson_r", "p_value", "split_half_r_in", "split_half_r_out"]],
        on=keys,
        suffixes=(" (the paper's metric)", " (the likelihood)"),
    )
    return side[side["kind"].isin(["all", "self"])]


def scatter(ax, paired: pd.DataFrame, title: str, unit: str) -> None:
    """Figure 2's panel: each head's score after masking, in-domain against out-of-domain, the
    unmasked model as a red star, Pearson's r in the title."""
    import seaborn as sns

    hue = "kind" if paired["kind"].nunique() > 1 else None
    sns.scatterplot(data=paired, x="score_in", y="score_out", hue=hue, ax=ax, s=25, alpha=0.8)
    # every masked score is base + delta, so base = score - delta (the same on every row)
    base_in, base_out = (
        (paired["score_in"] - paired["delta_in"]).iloc[0],
        (paired["score_out"] - paired["delta_out"]).iloc[0],
    )
    ax.scatter([base_in], [base_out], marker="*", s=250, color="red", label="unmasked", zorder=3)
    r, p = correlation(paired)
    ax.set(
        title=f"{title}\nPearson r = {r:.2f} (p = {p:.1g})", xlabel=f"{unit} in-domain", ylabel=f"{unit} out-of-domain"
    )
    ax.legend(fontsize=8)


@dataclass(frozen=True)
class _Study:
    """The chapter's sweeps: for each track (``"translation"``, ``"classifier"``), its model
    ``names[track]`` with every head masked alone on an in-domain and an out-of-domain set
    (``sets[track]``, drawn from ``splits[track]``), on every training run and on both measures:
    ``effects[track, measure]`` is ``effects``' ``{seed: (in-domain, out-of-domain)}``."""

    sweeps: HeadSweeps
    names: Mapping[str, str]
    splits: Mapping[str, tuple[str, str]]
    sets: Mapping[str, tuple[list, list]]
    effects: Mapping[tuple[str, str], dict]

    def pairs(self, track: str, measure: str = "metric") -> pd.DataFrame:
        """``pairs`` of one track's effects on ``measure``, every training run stacked."""
        return pairs(self.effects[track, measure])

    def correlations(self, measure: str = "metric") -> pd.DataFrame:
        """``correlations`` of both tracks on ``measure``, the translation model first."""
        return correlations([(self.names[t], t, self.effects[t, measure]) for t in ("translation", "classifier")])

    def label_shifts(self) -> pd.DataFrame:
        """``label_shifts`` of the classifier on its two sets."""
        return label_shifts(self.sweeps, self.names["classifier"], self.sets["classifier"], self.splits["classifier"])

    def sizes_line(self) -> str:
        """What the sweeps rest on: examples per domain (translation: decoded for BLEU, and scored
        by the likelihood)."""
        clf, mt = self.sets["classifier"], self.sets["translation"]
        decoded = " / ".join(f"BLEU on {len(self.sweeps.decoded(s))}, likelihood on {len(s)}" for s in mt)
        return (
            f"{self.names['classifier']}: {len(clf[0])} / {len(clf[1])} examples in / out of domain, on both "
            f"scores; {self.names['translation']}: {decoded} sentences in / out of domain"
        )

    def figure(self, suptitle: str):
        """Figure 2: each track's first training run, in-domain against out-of-domain scores on its
        metric (``scatter``), the translation model on the left. Returns the figure."""
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
        for ax, letter, track in zip(axes, "ab", ("translation", "classifier")):
            inside, outside = self.splits[track]
            title = f"({letter}) {self.names[track]}: {inside} vs {outside}"
            scatter(ax, course.first_seed(self.pairs(track)), title, UNITS[track])
        fig.suptitle(suptitle)
        fig.tight_layout()
        return fig


def study(
    sweeps: HeadSweeps, names: Mapping[str, str], splits: Mapping[str, tuple[str, str]], sizes: tuple[int, int]
) -> _Study:
    """Run the chapter's sweeps (``_Study``): for each track of ``names`` (``{"classifier": model,
    "translation": model}``), ``sets`` of ``sizes`` drawn from ``splits[track]``, and every head
    masked alone on both, on every training run, on the paper's metric and on the likelihood
    (the likelihood reads the metric sweep's cache where it can)."""
    drawn = {t: sets(sweeps, name, splits[t], sizes) for t, name in names.items()}
    found = {(t, m): effects(sweeps, names[t], drawn[t], m) for m in _SCORED_ON for t in names}
    return _Study(sweeps, dict(names), {t: tuple(splits[t]) for t in names}, drawn, found)


CHAPTER = "05_cross_domain"
_STRONG_R = 0.40  # "effects in domain predict effects out of domain": Pearson r at least this
LEVEL = 0.01  # ... with its interval (1 - LEVEL, over the heads) above 0
_DRAWS = 2000  # bootstrap resamples of the heads
PER_HEAD = {"translation": "05_cross_domain_translation", "classifier": "05_cross_domain_classifier"}


def _pairs(r: Results) -> dict[str, pd.DataFrame]:
    """Per model of ``05_cross_domain_r`` (the translation model's row over every kind, the
    classifier's over its self-attention): its heads' changes in and out of domain, every seed of
    ``r``."""
    table = r["05_cross_domain_r"]
    rows = table[table["kind"].isin(["all", "self"])].drop_duplicates("model")
    out = {}
    for model, kind in zip(rows["model"], rows["kind"]):
        out[str(model)] = r[PER_HEAD["classifier" if kind == "self" else "translation"]]
    return out


def _pooled_r(heads: pd.DataFrame, draws: int = _DRAWS, seed: int = 0) -> tuple[float, np.ndarray, dict]:
    """``(r, draws of r, {training seed: r})``: Pearson r of the heads' changes in and out of
    domain per seed, pooled as the mean of Fisher's z over the seeds (seeds' heads are different
    units: stacking them would add the gap between the seeds' means to r), and its bootstrap
    draws: each seed's heads resampled on their own (``draws`` times, from ``seed``), the
    resampled z averaged over the seeds. The heads are the units, so a few heads with large
    effects weigh as they do in the data, not as a normal population would (1 / sqrt(n - 3))."""
    rng = np.random.default_rng(seed)
    z, z_draws, per_seed = [], [], {}
    seeds = heads["training_seed"] if "training_seed" in heads else pd.Series(0, index=heads.index)
    for s, part in heads.groupby(seeds, sort=True):
        x, y = part["delta_in"].to_numpy(float), part["delta_out"].to_numpy(float)
        r = _r(x, y)
        per_seed[int(s)] = r
        z.append(np.arctanh(np.clip(r, -0.999999, 0.999999)))
        pick = rng.integers(0, len(x), size=(draws, len(x)))
        z_draws.append(np.arctanh(np.clip(_r_rows(x[pick], y[pick]), -0.999999, 0.999999)))
    return float(np.tanh(np.mean(z))), np.tanh(np.mean(z_draws, axis=0)), per_seed


def _r(x: np.ndarray, y: np.ndarray) -> float:
    return float(_r_rows(x[None], y[None])[0])


def _r_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of each row of ``x`` with the same row of ``y`` (NaN where a row does not vary:
    r is undefined there, not 0)."""
    x, y = x - x.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
    scale = np.sqrt((x * x).sum(1) * (y * y).sum(1))
    return np.divide((x * y).sum(1), scale, out=np.full(len(x), np.nan), where=scale > 0)


def cross_domain(r: Results) -> tuple[str, str]:
    """Per model: r pooled over the seeds with its (1 - ``LEVEL``) bootstrap interval over the
    heads; strong where r >= ``_STRONG_R`` and the interval lies above 0, weak where the whole
    interval lies below ``_STRONG_R`` (the heads' noise excludes a strong r), undecided otherwise
    (or where r is undefined). Reproduced: strong for every model; partly: strong for some, weak
    for the others; not reproduced: weak for every model; read over both states of each undecided
    model (``supported``)."""
    parts, states = [], []
    for model, heads in _pairs(r).items():
        r_all, draws, _ = _pooled_r(heads)
        if np.isnan(r_all):  # some seed's heads change nothing in or out of domain
            states.append((True, False))
            parts.append(f"{model} r undefined (no change to correlate)")
            continue
        low, high = np.nanquantile(draws, [LEVEL / 2, 1 - LEVEL / 2])
        strong, weak = r_all >= _STRONG_R and low > 0, high < _STRONG_R
        states.append((True,) if strong else (False,) if weak else (True, False))
        parts.append(f"{model} r = {r_all:.2f} [{low:.2f}, {high:.2f}]" + ("" if strong or weak else " (undecided)"))
    seeds = f" ({len(r.seeds)} seeds pooled)" if len(r.seeds) > 1 else ""
    verdict = supported(three_way(all(each), any(each)) for each in itertools.product(*states))
    return "; ".join(parts) + seeds, verdict


def _correlation_statistic(r: Results) -> dict[str, Pairs]:
    """Each model's heads, their changes in and out of domain, for the between-seed test: a
    permutation of the heads between the seeds (``between_seeds.Pairs``). Fisher's z with its
    normal error 1 / sqrt(n - 3), and a bootstrap's error over the heads too, called alike seeds
    with heavy-tailed heads different too often (tests/test_between_seeds.py)."""
    return {
        model: Pairs(tuple(heads["delta_in"].astype(float)), tuple(heads["delta_out"].astype(float)))
        for model, heads in _pairs(r).items()
    }


CLAIMS = [
    Claim(
        "cross_domain",
        "§3.4, Figure 2",
        "A head's effect in domain predicts its effect out of domain",
        f"r = {paper_values.CROSS_DOMAIN_R['translation']} (WMT), {paper_values.CROSS_DOMAIN_R['classifier']} (BERT)",
        f"reproduced: r >= {_STRONG_R} for every model, with its {1 - LEVEL:.0%} bootstrap interval over the heads "
        f"above 0 (r pooled over the seeds as the mean of Fisher's z); partly: for one, the others' intervals below "
        f"{_STRONG_R}; not reproduced: every model's interval below {_STRONG_R}; a model neither way, or with r "
        "undefined, is read both ways",
        CHAPTER,
        cross_domain,
        likelihood=True,
        sample=lambda r: samples.correlation(r["05_cross_domain_r"], LEVEL),
        seed_statistic=_correlation_statistic,
    ),
]


def findings(tables: ChapterTables) -> str:
    """Chapter 05's findings: per model, measure and seed, the cross-domain r (all heads pooled)
    with its significance, the split-half r that bounds it, and whether the scores spread wider
    out of domain than in it (the paper: MTNT's BLEU moves over a wider range)."""
    lines = []
    for suffix, measure in MEASURES:
        table = tables[f"05_cross_domain_r{suffix}"]
        pooled = table[table["paper_r"].notna()]
        for model, part in pooled.groupby("model", sort=False):
            name = str(model)
            part = part.sort_values("training_seed")
            rs = [
                f"{r_text(r)} (p = {p:.2g})" if not math.isnan(r) else "undefined"
                for r, p in zip(part["pearson_r"], part["p_value"])
            ]
            halves = [f"{r_text(a)}/{r_text(b)}" for a, b in zip(part["split_half_r_in"], part["split_half_r_out"])]
            seeds = [int(s) for s in part["training_seed"]]
            spreads = [
                f"{'wider' if o > i else 'narrower'} ({o:.3g} against {i:.3g})"
                for i, o in zip(part["spread_in"], part["spread_out"])
            ]
            lines.append(
                f"**{name}, {measure}:** r = {words(rs)} across domains (seeds {words(seeds)}; the paper: "
                f"{part['paper_r'].iloc[0]:.2f}). The split-half r, in-domain/out-of-domain: {words(halves)}. "
                f"Out of domain the scores after masking spread {words(spreads)}."
            )
    return "\n\n".join(lines + _class_lines(tables))


def _class_lines(tables: ChapterTables) -> list[str]:
    """The classifier's correlation read class by class (``05_class_by_class``, ``class_by_class``
    of ``05_label_shifts``): whether its heads act alike in both domains once a label's gain is
    not netted against another's loss; none for a run from before the table existed."""
    table = tables.get("05_class_by_class")
    if table is None:
        return []
    table = table.sort_values("training_seed")
    flipped = table[(table["accuracy r"] < 0) & (table["accuracy p"] < 0.01)]
    line = (
        f"**The classifier, class by class:** across domains its heads' recall changes correlate one label at a "
        f"time, each r over the {words(sorted({int(h) for h in table['heads']}))} heads: "
        f"{'; '.join(_class_rs(table))}; their accuracy changes correlate r = "
        f"{words([r_text(r) for r in table['accuracy r']])}. Masking a head mostly moves predictions between "
        f"labels {words(list(table['traded labels']))}, one label's recall rising as the other's falls (r = "
        f"{words([r_text(r) for r in table['trade r (in domain)']])} in domain), so a head's accuracy change is the "
        "small net of that trade."
    )
    explained = flipped[flipped["classes alike"].astype(bool)]
    if len(explained):
        line += (
            f" For seed{'s' * (len(explained) > 1)} {words([str(int(s)) for s in explained['training_seed']])} the "
            "net takes opposite signs in the two domains, and the accuracy correlation turns significantly negative "
            f"while every class's own r is positive (p < {_ALIKE_LEVEL} each). That is a property of where this "
            "model's decisions sit between two labels on each set, not of heads that matter in one domain and "
            "not in the other."
        )
    unexplained = flipped.drop(explained.index)
    if len(unexplained):
        line += (
            f" For seed{'s' * (len(unexplained) > 1)} {words([str(int(s)) for s in unexplained['training_seed']])} "
            "the accuracy correlation is significantly negative and the classes do not move alike either (not every "
            f"class's own r is positive with p < {_ALIKE_LEVEL}): this run does not explain it."
        )
    return [line]


def _class_rs(table) -> list[str]:
    """Per seed, each moving label's r across domains: ``seed 0: label 0 0.95, label 1 0.93``."""
    out = []
    for row in table.to_dict("records"):
        labels = [k.removeprefix("class r (").removesuffix(")") for k in row if k.startswith("class r (")]
        shown = [f"label {x} {r_text(row[f'class r ({x})'])}" for x in labels if not pd.isna(row[f"class r ({x})"])]
        out.append(f"seed {int(row['training_seed'])}: {', '.join(shown) or 'no label moving in both domains'}")
    return out
