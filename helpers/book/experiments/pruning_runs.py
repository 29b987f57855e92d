"""§4.2, pruning heads greedily by importance (Figure 3), against the one-head ablation order and
random orders, on every training run, on the paper's metric and on the likelihood.

    runs = PruningRuns(sweeps, classifier="nli", classifier_split="matched", ...)
    curves = runs.curves("nli", "metric")        # every seed: one row per order and pruning step
    summary = summarise(curves, TOLERANCE)       # the share prunable with no noticeable loss

``PruningRuns`` loads each run once and estimates I_h on it once, for both measures; a
classifier's two scores come from the same label log-probabilities, one pass per pruning step.

Every order is estimated on data its curve does not score: I_h on the training split, the
one-head ablation order on a held-out half of the scored split (chapter 03's sweep over the
whole split, read by position), the curves on the other half. Random orders are a band: their
mean and their 5th and 95th percentiles per share (``summarise``), drawn as a 5-95% band.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ...heads.gates import heads_of, spec_of
from ...heads.significance import Bootstrap, resample_indices
from ...sweeps.curve_spread import Spread, prunable_shares, resampled_curves
from ...sweeps.pruning_curves import (
    counts,
    order_by_ablation,
    order_by_importance,
    prunable_share,
    pruning_curves,
    random_order,
    reestimated_curve,
)
from ...zoo.scorers import (
    classifier_importance,
    classifier_scorers,
    translation_importance,
    translation_likelihood_scorer,
    translation_scorer,
)
from .. import course
from ..paper import values as paper_values
from ..store.columns import BAND, IN_SAMPLE, RANDOM_HIGH, RANDOM_LOW, RANDOM_MEAN  # noqa: F401 (chapters read them here)
from .sweeps import HeadSweeps, Run

TOLERANCE = {"classifier": 0.01, "translation": 1.0}  # the paper's "no noticeable loss": 1% accuracy, 1 BLEU
# the likelihood: perplexity at most 1% above the unpruned model's (chapter 11 too)
_LIKELIHOOD_TOLERANCE = math.log(1.01)
LIKELIHOOD_TOLERANCES = {"classifier": _LIKELIHOOD_TOLERANCE, "translation": _LIKELIHOOD_TOLERANCE}


def _orders_and_curves(
    name: str,
    model,
    *,
    score: Callable,
    importance,
    effects: pd.DataFrame,
    random_orders: int,
    seed: int,
    step: float,
    reestimate: bool = False,
    tolerance: float | None = None,
    bootstrap: Bootstrap = Bootstrap(),
) -> pd.DataFrame:
    """The pruning curves of ``model`` by importance, by the one-head ablation ``effects`` and by
    ``random_orders`` random orders (seeds ``seed``, ``seed + 1``, ...), each step scored by
    ``score`` (a step two orders share is scored once); with ``reestimate``, also the order that
    re-estimates I_h before every step. ``importance``: (I_h of the unpruned model, the function
    that estimates it under gates). With ``tolerance`` (the score a prunable share may lose), the
    importance and ablation rows carry their prunable share's sampling error (``share_spreads``)."""
    pool = heads_of(model)
    first, estimate = importance
    orders = {"importance": order_by_importance(first, pool), "ablation": order_by_ablation(effects, pool)}
    chosen = dict(orders)
    orders.update({f"random {s}": random_order(pool, seed + s) for s in range(random_orders)})
    out = [pruning_curves(model, orders, evaluate=score, step=step, desc=name)]
    if reestimate:
        again = lambda m, gates: estimate(m, gates=gates)
        out.append(
            reestimated_curve(model, pool, importance=again, evaluate=score, step=step)[0].assign(order="re-estimated")
        )
    curves = pd.concat(out, ignore_index=True).assign(model=name)
    if tolerance is None or getattr(score, "stats", None) is None:
        return curves
    spreads = share_spreads(model, chosen, score=score, tolerance=tolerance, step=step, bootstrap=bootstrap)
    for column in _SPREAD_COLUMNS:
        curves[column] = curves["order"].map({o: row.get(column, math.nan) for o, row in spreads.items()})
    return curves


_SPREAD_COLUMNS = ("share_se", "share_low", "share_high", "share_resamples", "minus_ablation_se", "spread_tolerance")


def share_spreads(
    model, orders: Mapping[str, Sequence], *, score: Callable, tolerance: float, step: float, bootstrap: Bootstrap
) -> dict[str, dict[str, float]]:
    """Per order of ``orders``: its prunable share's sampling error over the scored examples
    (``curve_spread``; ``bootstrap.n_resamples`` resamples, the same draws for every order, so
    orders compare paired): ``share_se`` and the 5-95% ``share_low`` / ``share_high``; the
    importance order also ``minus_ablation_se``, the standard error of its share less the
    ablation order's. ``score`` must have ``stats`` and ``from_stats`` (``zoo.scorers``); the
    steps are read from its cache, not scored again."""
    resampled = {}
    for label, order in orders.items():
        shares, curves = resampled_steps(model, order, score=score, step=step, bootstrap=bootstrap)
        resampled[label] = prunable_shares(curves, shares, tolerance)
    out = {}
    for label, values in resampled.items():
        spread = Spread.of(values)
        out[label] = {
            "share_se": spread.se,
            "share_low": spread.low,
            "share_high": spread.high,
            "share_resamples": spread.resamples,
            "spread_tolerance": tolerance,
        }
    if {"importance", "ablation"} <= set(resampled):
        out["importance"]["minus_ablation_se"] = Spread.of(resampled["importance"] - resampled["ablation"]).se
    return out


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
    random_orders: int = 20
    reestimate: bool = False
    step: float = 0.1
    seed: int = 0
    bleu_random_orders: int = 2  # BLEU decodes every step: fewer random orders there (a band of few)
    held_out_ablation: bool = True  # the ablation order from the half of the split the curves do not score
    _loaded: dict = field(default_factory=dict, repr=False)

    def figure(self, curves: pd.DataFrame, suptitle: str, measure: str = "metric"):
        """Figure 3 (``figure``) of ``curves`` on ``measure``: the translation model on the left, the
        classifier on the right, each on its first training run, titled by its model and scored set."""
        if measure == "metric":
            panels = [
                (self.translation, f"(a) {self.translation}: BLEU on {self.translation_split}", "BLEU"),
                (self.classifier, f"(b) {self.classifier}: accuracy on {self.classifier_split}", "accuracy"),
            ]
        else:
            panels = [
                (
                    self.translation,
                    f"(a) {self.translation}: log-likelihood per token on {self.translation_split}",
                    "nats per token",
                ),
                (
                    self.classifier,
                    f"(b) {self.classifier}: gold-label log-probability on {self.classifier_split}",
                    "nats",
                ),
            ]
        return figure(curves, panels, suptitle)

    @property
    def protocol(self) -> str:
        """Where the ablation order comes from: ``"held_out"`` (the half of the split the curves do
        not score) or ``"in_sample"`` (the set the curves score, the paper's protocol)."""
        return "held_out" if self.held_out_ablation else "in_sample"

    def beside(self) -> PruningRuns:
        """The same runs under the other protocol (``held_out_ablation`` flipped): the importance
        and ablation orders only, no random band and no re-estimation. The models and their I_h
        (estimated on ``importance_split``, the same under both protocols) are shared, not
        estimated again."""
        shared = {key: value for key, value in self._loaded.items() if isinstance(key, str)}
        return replace(
            self,
            held_out_ablation=not self.held_out_ablation,
            random_orders=0,
            bleu_random_orders=0,
            reestimate=False,
            _loaded=shared,
        )

    def bleu_signature(self) -> str:
        """The BLEU the translation curves score (the sweeps', tokenized as the authors' prune.py)."""
        return self.sweeps.bleu_definition(self.translation).signature()

    def halves(self, n: int) -> tuple[list[int], list[int]]:
        """``(held out, scored)``: positions of a split of ``n`` examples, two disjoint halves drawn
        with ``seed`` (each in order); with ``held_out_ablation`` off, ``([], every position)``."""
        if not self.held_out_ablation:
            return [], list(range(n))
        held = sorted(random.Random(self.seed).sample(range(n), n // 2))
        taken = set(held)
        return held, [i for i in range(n) if i not in taken]

    def _sets(self, name: str, scored: str) -> tuple[list, list]:
        """(the examples the curves score, the examples I_h is estimated on)."""
        data = self.sweeps.data(name)
        split = data[scored]
        _, kept = self.halves(len(split))
        return (
            course.subset([split[i] for i in kept], self.max_examples),
            course.subset(data[self.importance_split], self.importance_examples),
        )

    def ablation_sweep(self, name: str, scored: str, measure: str) -> tuple[list, list[int] | None]:
        """``(examples, positions)``: the one-head sweep the ablation order reads (chapter 03's, over
        ``ablation_examples`` of the split) and the positions in it of the held-out half (for BLEU,
        in the pairs the sweep decodes of them; None: every position, in-sample)."""
        split = self.sweeps.data(name)[scored]
        index = course.subset(list(range(len(split))), self.ablation_examples)
        held, _ = self.halves(len(split))
        if not held:
            return [split[i] for i in index], None
        swept = self.sweeps.decoded(index) if name == self.translation and measure == "metric" else index
        held = set(held)  # BLEU: positions in the pairs its sweep decodes (``HeadSweeps.decoded``)
        return [split[i] for i in index], [k for k, i in enumerate(swept) if i in held]

    def selected_on(self, name: str) -> dict[str, str]:
        """Per order, the data it was estimated on (the curves score the other data)."""
        scored = self.classifier_split if name == self.classifier else self.translation_split
        return {
            "importance": f"{self.importance_split} ({self.importance_examples or 'all'} examples)",
            "ablation": f"held-out half of {scored}" if self.held_out_ablation else IN_SAMPLE,
            "re-estimated": f"{self.importance_split} (re-estimated each step)",
        }

    def random_count(self, name: str, measure: str) -> int:
        """Random orders per curve: ``bleu_random_orders`` for BLEU, else ``random_orders``."""
        bleu = name == self.translation and measure == "metric"
        return min(self.random_orders, self.bleu_random_orders) if bleu else self.random_orders

    def _model(self, name: str, run: str) -> tuple:
        """(model, tokenizer or None, classifier scorers or None) of a run, loaded once."""
        key = ("model", run)
        if key not in self._loaded:
            settings = self.sweeps.settings
            if name == self.classifier:
                scored, _ = self._sets(name, self.classifier_split)
                model, tokenizer = course.load_classifier(settings, run)
                scorers = classifier_scorers(
                    tokenizer, scored, metrics=["accuracy", "log_likelihood"], max_length=settings.max_length(name)
                )
                self._loaded[key] = model, tokenizer, scorers
            else:
                self._loaded[key] = course.load_translation(settings, run), None, None
        return self._loaded[key]

    def _loaded_run(self, name: str, run: str):
        """(model, tokenizer, (I_h, its estimator)) of a run, loaded and estimated once."""
        if run not in self._loaded:
            model, tokenizer, _ = self._model(name, run)
            if name == self.classifier:
                _, ranked = self._sets(name, self.classifier_split)
                max_length = self.sweeps.settings.max_length(name)
                estimate = lambda m, **kw: classifier_importance(m, tokenizer, ranked, max_length, **kw)
            else:
                _, ranked = self._sets(name, self.translation_split)
                estimate = lambda m, **kw: translation_importance(m, ranked, **kw)
            self._loaded[run] = model, tokenizer, (estimate(model), estimate)
        return self._loaded[run]

    def scored_run(self, name: str, run: str, measure: str) -> tuple:
        """(model, tokenizer or None, score): a run and the scorer of ``measure`` ("metric" or
        "likelihood") on the scored set, as the curves use them (``score.many`` scores head specs)."""
        model, tokenizer, scorers = self._model(name, run)
        if name == self.classifier:
            return model, tokenizer, scorers["accuracy" if measure == "metric" else "log_likelihood"]
        scored, _ = self._sets(name, self.translation_split)
        if measure == "metric":
            return (
                model,
                None,
                translation_scorer(
                    self.sweeps.decoded(scored),
                    beam=self.sweeps.beam,
                    max_len_b=self.sweeps.max_len_b,
                    max_len_a=self.sweeps.max_len_a,
                    definition=self.sweeps.bleu_definition(name),
                ),
            )
        return model, None, translation_likelihood_scorer(scored)  # teacher-forced per reference token: no decoding

    def all_curves(self, measure: str = "metric") -> pd.DataFrame:
        """``curves`` of the classifier and of the translation model, in one table."""
        return pd.concat(
            [self.curves(self.classifier, measure), self.curves(self.translation, measure)], ignore_index=True
        )

    def summary(self, curves: pd.DataFrame, measure: str = "metric") -> pd.DataFrame:
        """``summarise`` of ``curves`` (``all_curves(measure)``) within the chapter's tolerance for
        ``measure``: the paper's ``TOLERANCE`` on the metric, 1% of perplexity
        (``LIKELIHOOD_TOLERANCES``) on the likelihood."""
        return summarise(curves, LIKELIHOOD_TOLERANCES if measure == "likelihood" else TOLERANCE)

    def importance_terms(self, name: str) -> dict:
        """Per-example |dL/d xi_h| (``heads.importance.importance_terms``: ``{kind: [examples,
        layers, heads]}``) of model ``name``'s first training run, on the examples its I_h is
        estimated on: their mean is the I_h the curves prune by."""
        from ...heads.importance import importance_terms
        from ...zoo.scorers import (
            classifier_loss,
            classifier_loss_batches,
            translation_loss,
            translation_loss_batches,
        )

        _, run = course.seed_runs(self.sweeps.settings, name, self.sweeps.training_seeds)[0]
        model, tokenizer, _ = self._model(name, run)
        if name == self.classifier:
            _, ranked = self._sets(name, self.classifier_split)
            batches = classifier_loss_batches(tokenizer, ranked, self.sweeps.settings.max_length(name))
            return importance_terms(model, batches, loss_fn=classifier_loss, progress=False)
        _, ranked = self._sets(name, self.translation_split)
        return importance_terms(
            model, translation_loss_batches(model, ranked), loss_fn=translation_loss, progress=False
        )

    def prunable_by(self, name: str) -> Callable[[dict], float]:
        """``share(I_h)``: the share of model ``name``'s heads (first training run) pruned in the
        order of that I_h with the likelihood of the scored set within ``_LIKELIHOOD_TOLERANCE``
        (the chapter's likelihood curves, one order at a time; a step another order masks alike is
        read from the scorer's kept passes)."""
        _, run = course.seed_runs(self.sweeps.settings, name, self.sweeps.training_seeds)[0]
        model, _, score = self.scored_run(name, run, "likelihood")
        pool = heads_of(model)

        def share(importance: dict) -> float:
            curve = pruning_curves(
                model,
                {"sample": order_by_importance(importance, pool)},
                evaluate=score,
                step=self.step,
                progress=False,
            )
            return prunable_share(curve, _LIKELIHOOD_TOLERANCE)

        return share

    def curves(self, name: str, measure: str = "metric") -> pd.DataFrame:
        """Every training run's pruning curves of model ``name`` (the classifier or the
        translation model), scored on ``measure`` ("metric" or "likelihood"), with ``track``."""
        track = "classifier" if name == self.classifier else "translation"
        scored_split = self.classifier_split if track == "classifier" else self.translation_split
        ablation_set, positions = self.ablation_sweep(name, scored_split, measure)
        selected_on = self.selected_on(name)
        out = []
        for seed, run in course.seed_runs(self.sweeps.settings, name, self.sweeps.training_seeds):
            model, tokenizer, importance = self._loaded_run(name, run)
            effects = Run(self.sweeps, name, run, seed, model, tokenizer).effects(
                ablation_set, "one_head", measure=measure, positions=positions
            )
            score = self.scored_run(name, run, measure)[2]
            tolerance = (
                TOLERANCE[track] if measure == "metric" else _LIKELIHOOD_TOLERANCE
            )  # as the chapter's summaries
            out.append(
                _orders_and_curves(
                    name,
                    model,
                    score=score,
                    importance=importance,
                    effects=effects,
                    random_orders=self.random_count(name, measure),
                    seed=self.seed,
                    step=self.step,
                    reestimate=self.reestimate,
                    tolerance=tolerance,
                    bootstrap=self.sweeps.bootstrap,
                ).assign(training_seed=seed)
            )
        scored, _ = self._sets(name, scored_split)
        examples = len(self.sweeps.decoded(scored)) if track == "translation" and measure == "metric" else len(scored)
        curves = pd.concat(out, ignore_index=True).assign(track=track, examples=examples, step=self.step)
        return curves.assign(selected_on=curves["order"].map(selected_on).fillna("-"))


def summarise(
    curves: pd.DataFrame,
    tolerance: dict[str, float],
    extras: Mapping[str, Callable[[pd.DataFrame], float]] | None = None,
) -> pd.DataFrame:
    """One row per track, model, seed and order: the share prunable within ``tolerance[track]``
    of the unpruned score, the score unpruned, at 50% and with every head pruned, and the
    paper's share beside the importance order's; each of ``extras`` (``{column: f(curve)}``) is
    computed per curve. The random orders become three rows, their mean (``RANDOM_MEAN``) and
    their 5th and 95th percentiles (``RANDOM_LOW``, ``RANDOM_HIGH``) of each column, with
    ``random_orders``, how many orders the band has (and on the top's row ``band_se``, the
    standard error of that percentile over the orders, ``quantile_error``); ``selected_on`` says
    what each order was estimated on, and ``examples`` and ``step`` what the curve was scored on
    and how finely, where the curves say; the importance and ablation rows keep their share's
    sampling error where the curves carry it at this tolerance (``spread_of``)."""
    rows = []
    for (track, name, training_seed, order), part in curves.groupby(
        ["track", "model", "training_seed", "order"], sort=False
    ):
        rows.append(
            {
                "track": track,
                "model": name,
                "training_seed": training_seed,
                "order": order,
                "prunable_share": prunable_share(part, tolerance[track]),
                "unpruned": part.loc[part["pruned"] == 0, "score"].iloc[0],
                "at_50%": part.loc[(part["share"] - 0.5).abs().idxmin(), "score"],
                "all_pruned": part.loc[part["share"] == 1, "score"].iloc[0],
                **{column: f(part) for column, f in (extras or {}).items()},
                **{column: part[column].iloc[0] for column in ("examples", "step") if column in part},
                **spread_of(part, tolerance[track]),
                "selected_on": part["selected_on"].iloc[0] if "selected_on" in part else "-",
            }
        )
    shares = pd.DataFrame(rows)
    keys = ["track", "model", "training_seed"]
    is_random = shares["order"].str.startswith("random")
    chosen = shares[~is_random].assign(random_orders=math.nan)
    out = [chosen]
    if is_random.any():
        grouped = shares[is_random].groupby(keys, sort=False)
        numeric = [c for c in shares.columns if c not in keys + ["order", "selected_on"]]
        n = grouped.size().rename("random_orders")
        band_se = grouped["prunable_share"].apply(lambda g: quantile_error(g.to_numpy(), BAND[1])).rename("band_se")
        for label, stat in (
            (RANDOM_MEAN, lambda g: g.mean()),
            (RANDOM_LOW, lambda g: g.quantile(BAND[0])),
            (RANDOM_HIGH, lambda g: g.quantile(BAND[1])),
        ):
            part = stat(grouped[numeric]).join(n)
            part = part.join(band_se) if label == RANDOM_HIGH else part
            out.append(part.reset_index().assign(order=label, selected_on="-"))
    table = pd.concat(out, ignore_index=True)
    order_of = {o: i for i, o in enumerate(dict.fromkeys(shares["order"].where(~is_random, RANDOM_MEAN)))}
    order_of.update({RANDOM_LOW: order_of.get(RANDOM_MEAN, 0) + 0.1, RANDOM_HIGH: order_of.get(RANDOM_MEAN, 0) + 0.2})
    position = {k: i for i, k in enumerate(dict.fromkeys(map(tuple, shares[keys].values)))}
    table = (
        table.assign(_at=[position[tuple(k)] for k in table[keys].values], _order=table["order"].map(order_of))
        .sort_values(["_at", "_order"])
        .drop(columns=["_at", "_order"])
        .reset_index(drop=True)
    )
    table["paper_prunable_share"] = [
        paper_values.PRUNABLE_SHARE[t] if o == "importance" else None for t, o in zip(table["track"], table["order"])
    ]
    return table


def resampled_steps(
    model, order: Sequence, *, score: Callable, step: float, bootstrap: Bootstrap
) -> tuple[np.ndarray, np.ndarray]:
    """``(shares [steps], curves [R, steps])``: the steps of ``order`` (as ``pruning_curves`` takes
    them) and their scores in each of ``bootstrap.n_resamples`` resamples of the examples, from
    ``score.stats`` (its kept passes). Every call over the same examples draws the same resamples
    (``bootstrap.seed``), so statistics of several orders or checkpoints compare paired."""
    steps = counts(len(order), step)
    stats = score.stats(model, [spec_of(order[:c]) for c in steps])
    indices = resample_indices(len(stats[0]), bootstrap.n_resamples, bootstrap.seed)
    return np.array(steps) / len(order), resampled_curves(stats, score.from_stats, indices)


def quantile_error(values: np.ndarray, q: float, n_resamples: int = 1000, seed: int = 0) -> float:
    """The standard error of the ``q`` quantile of ``values`` (e.g. the random orders' prunable
    shares, whose 95th percentile is the band's top), by resampling the values with replacement."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        return math.nan
    draws = values[np.random.default_rng(seed).integers(0, len(values), (n_resamples, len(values)))]
    return float(np.quantile(draws, q, axis=1).std(ddof=1))


def spread_of(curve: pd.DataFrame, tolerance: float) -> dict[str, float]:
    """The curve's ``share_spreads`` columns, where they were computed at ``tolerance`` (a summary
    at another tolerance gets none: the spread belongs to the share it was resampled for)."""
    if "spread_tolerance" not in curve or not np.isclose(curve["spread_tolerance"].iloc[0], tolerance):
        return {}
    return {
        column: curve[column].iloc[0] for column in _SPREAD_COLUMNS if column != "spread_tolerance" and column in curve
    }


def by_seed(summary: pd.DataFrame, band: bool = False) -> pd.DataFrame:
    """The prunable share of each model by importance and by ablation, one column per seed, and its
    spread over seeds; with ``band``, the random orders' 5th and 95th percentiles too, without the
    spread (a band's rows spread by its orders, not by seeds)."""
    orders = ("importance", "ablation") + ((RANDOM_LOW, RANDOM_HIGH) if band else ())
    part = summary[summary["order"].isin(orders)]
    table = part.pivot(index=["model", "order"], columns="training_seed", values="prunable_share").rename(
        columns=lambda s: f"seed {int(s)}"
    )
    return table if band else table.assign(spread=lambda t: t.max(axis=1) - t.min(axis=1))


def panel(ax, data: pd.DataFrame, title: str, ylabel: str) -> None:
    """Figure 3's panel: the importance, ablation, re-estimated (and L0 gates') curves, the random
    orders' 5-95% band (per share, over the orders)."""
    rand = data[data["order"].str.startswith("random")]
    if len(rand):
        band = rand.groupby("share")["score"].quantile(list(BAND)).unstack().reset_index()
        n = rand["order"].nunique()
        ax.fill_between(
            band["share"] * 100,
            band[BAND[0]],
            band[BAND[1]],
            color="grey",
            alpha=0.3,
            label=f"random, {BAND[0]:.0%}-{BAND[1]:.0%} ({n} orders)",
        )
    styles = {
        "importance": ("tab:blue", "-"),
        "ablation": ("tab:green", "--"),
        "re-estimated": ("tab:purple", ":"),
        "L0 gates": ("tab:red", "-."),
    }  # chapter 12's fourth method
    for label, (color, dash) in styles.items():
        part = data[data["order"] == label]
        if len(part):
            ax.plot(
                part["share"] * 100, part["score"], color=color, linestyle=dash, marker="o", markersize=3, label=label
            )
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


# ---- how many examples importance needs ---------------------------------------------------------------
# chapter 11's defaults for its verse sets, where a profile does not set its own (a test holds them to the notebook's)
LM_SETS = {
    "select_verses": 120,
    "report_verses": 120,
    "version": "web",
    "max_words": 40,
    "batch_size": 16,
    "configs_per_pass": 3,
    "seed": 0,
}


_LM_CURVE_SHARES = (0.1, 0.3)  # the language model's curve is read at these shares of its query heads


def importance_sample(
    runs: PruningRuns,
    sizes: Sequence[int],
    *,
    draws: int = 20,
    language_model: str | None = None,
    curve_draws: int = 0,
) -> pd.DataFrame:
    """``importance_sample.agreement_table`` of the classifier's and the translation model's
    first training run (terms on the examples chapter 06 estimates I_h on) and, given a
    ``language_model`` (``registry.load_causal_lm`` names), of that model on chapter 11's select
    set (drawn with the profile's settings for chapter 11, else ``LM_SETS``); with
    ``model`` and ``used`` (how many examples that model's pruning verdict estimates I_h on: all
    the terms). The first ``curve_draws`` draws of each size also prune by their I_h: the
    classifier and the translation model give ``prunable_share`` on the likelihood
    (``PruningRuns.prunable_by``); the language model, whose perplexity already rises past 1% at
    its curve's first step (chapter 11), gives the perplexity rise on chapter 11's report set at
    each share of ``_LM_CURVE_SHARES`` (``_language_model_sample``)."""
    from ..profiles.profile import parameters_for
    from .importance_sample import agreement_table

    terms = {name: runs.importance_terms(name) for name in (runs.classifier, runs.translation)}
    curves = {name: runs.prunable_by(name) for name in (runs.classifier, runs.translation)} if curve_draws else {}
    points = {}
    if language_model:
        chapter_11 = {
            **LM_SETS,
            **{k: v for k, v in parameters_for(runs.sweeps.settings, "11_nine_heads", {}).items() if k in LM_SETS},
        }  # the profile's defaults too: the sets chapter 11 draws
        terms[language_model], points[language_model] = _language_model_sample(language_model, chapter_11)
    return pd.concat(
        [
            agreement_table(
                t,
                sizes,
                draws=draws,
                seed=runs.seed,
                prunable=curves.get(name),
                curve_draws=curve_draws,
                curve_points=points.get(name),
            ).assign(model=name, used=len(next(iter(t.values()))))
            for name, t in terms.items()
        ],
        ignore_index=True,
    )


def _language_model_sample(
    model_name: str, sets: Mapping[str, object], shares: Sequence[float] = _LM_CURVE_SHARES
) -> tuple[dict, Callable[[dict], dict[str, float]]]:
    """A causal LM's per-verse importance terms on chapter 11's select set, drawn as there
    (``sets``: ``LM_SETS``' keys): the examples its I_h is estimated on; and ``points(I_h)``: the
    perplexity rise (%) on chapter 11's report set with the least important ``share`` of the
    query heads masked in the order of that I_h, for each share (chapter 11's importance curve at
    those shares when I_h is the whole select set's)."""
    from ...heads.gates import spec_of
    from ...heads.importance import importance_terms
    from ...sweeps.pruning_curves import score_specs
    from ...zoo.causal_lm import PerplexityScorer, lm_batches, lm_loss, verse_texts
    from ...zoo.registry import load_causal_lm
    from .importance_sample import rise_column

    model, tokenizer = load_causal_lm(model_name, seed=sets["seed"])
    texts = verse_texts(
        {"select": sets["select_verses"], "report": sets["report_verses"]},
        version=sets["version"],
        max_words=sets["max_words"],
        seed=sets["seed"],
    )
    batches = {split: lm_batches(tokenizer, t, sets["batch_size"]) for split, t in texts.items()}
    terms = importance_terms(model, batches["select"], loss_fn=lm_loss, progress=False)
    scorer = PerplexityScorer(batches["report"], sets.get("configs_per_pass", 1))
    pool = heads_of(model)
    unmasked = scorer(model)

    def points(importance: dict) -> dict[str, float]:
        order = order_by_importance(importance, pool)
        scores = score_specs(
            model, [spec_of(order[: round(s * len(pool))]) for s in shares], evaluate=scorer, progress=False
        )
        return {rise_column(s): 100 * (math.exp(unmasked - score) - 1) for s, score in zip(shares, scores)}

    return terms, points


def sample_tables(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """What chapter 06 saves of ``importance_sample``'s draws: the draws
    (``06_importance_sample``) and their ``importance_sample.summary`` per model and sample size
    (``importance_sample.SUMMARY``), which its findings state."""
    from .importance_sample import SUMMARY, summary

    return {"06_importance_sample": table, SUMMARY: summary(table)}


def sample_figure(table: pd.DataFrame):
    """``importance_sample.figure`` with each model's pruning sample marked."""
    from .importance_sample import figure

    used = table.groupby("model", sort=False)["used"].first()
    return figure(table, {f"{m}'s I_h ({n})": n for m, n in used.items()})
