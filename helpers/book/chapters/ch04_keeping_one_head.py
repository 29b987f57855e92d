"""Chapter 04, keeping one head: its experiment, the rules that judge its claims and its findings in words.

§3.3 and Appendix A, keeping one head per layer: Tables 2, 3, 5 and 6, and their counts.

For each layer the head kept is the one whose all-but-one configuration scores best on the set
it is chosen on; the layer is then reported on the same set (Tables 2 and 3) or on another
(Tables 5 and 6). ``_translation_run`` / ``_classifier_run`` sweep one training run on both sets,
``tables`` picks the heads per seed, ``counts`` summarises each table per kind (the layers that
drop significantly, the worst layer) and ``paper_counts`` does the same for the paper's tables.

Chapter 04's claims (§3.3, Tables 2, 3 and 5): most layers can be cut to one head, except the
last Enc-Dec layer; no BERT layer needs more; choosing the head on other data costs more. The
rules read ``04_keep_one_counts``, and the per-layer rows of ``04_keep_one_translation`` where a
claim pairs layers or reads one layer (``per_layer``).

``findings``: chapter 04's "What this run shows" paragraph.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from .. import course
from ..experiments import equivalence
from ..experiments.head_effects import (
    best_per_layer,
    configs_of,
    held_out,
    kept_head,
    layer_table,
    resolution,
    sample_columns,
)
from ..experiments.sweeps import HeadSweeps, Run
from ..paper import values as paper_values
from ..store import measures
from ..store.columns import shown
from ..store.results import ChapterTables
from ..verdicts import samples
from ..verdicts.between_seeds import Share, Value
from ..verdicts.engine import (
    CANNOT_TELL,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Results,
    ours,
    present,
    three_way,
)
from ..verdicts.pooling import interval_se, mean_over_seeds, over_counts, supported
from ..verdicts.text import MEASURES, heads_per_layer_line, interval, paper_model, words

_AGAIN = "{} again"  # a set's rows of the chosen heads, reported in two looks over the whole set
_SAME_SET = "chosen and reported on {}"  # Tables 2 and 3: a protocol's name in the counts
_OTHER_SET = "chosen on {}, reported on {}"  # Tables 5 and 6


def _protocol_sets(protocol: str) -> tuple[str, str]:
    """``(chosen on, reported on)``: the sets of a protocol named as ``Protocols.counts`` names it
    (``_SAME_SET``, ``_OTHER_SET``); a ValueError for any other name."""
    same = re.fullmatch(_SAME_SET.format(r"(\S+)"), protocol)
    if same:
        return same[1], same[1]
    other = re.fullmatch(_OTHER_SET.format(r"(\S+)", r"(\S+)"), protocol)
    if other:
        return other[1], other[2]
    raise ValueError(f"{protocol!r} is not a protocol's name: {_SAME_SET!r} or {_OTHER_SET!r}")


def per_layer(effects: pd.DataFrame, protocol: str, likelihood: bool, margin: float) -> pd.DataFrame:
    """One row per (training seed, kind, layer) of a model's saved per-item ``effects`` (every
    all-but-one configuration on the set heads are chosen on, the chosen ones on the set they are
    reported on; ``heads`` as lists or as their text) under ``protocol``: the chosen head's row as
    ``tables`` picks it, with ``down`` and ``undecided`` as ``summary`` counts them (on the
    paper's metric: dropped significantly, and placed by neither test; on the likelihood: wholly
    below -``margin``, and across a margin)."""
    effects = effects.assign(heads=[_heads(h) for h in effects["heads"]])
    if "training_seed" not in effects:  # a model measured once
        effects = effects.assign(training_seed=0)
    chosen, reported = _protocol_sets(protocol)
    rows = []
    for seed, (same, held) in tables(effects, chosen, chosen, reported).items():
        table = same if chosen == reported else held
        rows.append(table.assign(training_seed=seed))
    table = pd.concat(rows, ignore_index=True)
    found = equivalence.classes(table, margin)
    significant = table["significant"].astype(bool)
    if likelihood:
        down, undecided = found == "harmful", found == "undetermined"
    else:
        down, undecided = significant & (table["delta"] < 0), (found == "undetermined") & ~significant
    return table.assign(down=down.to_numpy(), undecided=undecided.to_numpy())


def _heads(heads) -> tuple[int, ...]:
    """A configuration's masked heads, from a list or from its text in a saved table."""
    return tuple(int(h) for h in (ast.literal_eval(heads) if isinstance(heads, str) else heads))


def _translation_run(
    run: Run, chosen_on: Sequence, *, reported_on: Sequence, names: tuple[str, str], measure: str = "metric"
) -> pd.DataFrame:
    """Every all-but-one configuration on ``chosen_on``, then the best one per layer on
    ``reported_on``; stacked with ``set`` from ``names`` (chosen, reported).

    BLEU with looks (``HeadSweeps.looks``): the heads are chosen on the decoded subset of
    ``chosen_on`` in one look, and the chosen ones are reported in two looks over the whole of each
    set (``HeadSweeps.bleu_in_looks``): on ``chosen_on`` too, as rows of set ``_AGAIN`` (its name),
    which ``tables`` reports for the same-set protocol. A layer the subset's 1-BLEU resolution
    leaves undecided is decoded on every pair of the split before it is called either way. On
    ``chosen_on`` the first look is the subset the heads were chosen on, which lifts the chosen
    head's score there: only a layer it finds harmful stops at it, every other one goes on to the
    whole split (whose other half is new to the choice; the rows keep the selection of the
    paper's same-set protocol, Table 2)."""
    chosen = run.effects(chosen_on, "all_but_one", measure=measure)
    picked = configs_of(best_per_layer(chosen))
    if measure != "metric" or run.sweeps.looks is None or not run.sweeps.is_translation(run.name):
        reported = run.effects(reported_on, picked, measure=measure)
        return pd.concat([chosen.assign(set=names[0]), reported.assign(set=names[1])])
    again = run.sweeps.bleu_in_looks(run, chosen_on, picked, chosen_here=True).assign(set=_AGAIN.format(names[0]))
    reported = run.sweeps.bleu_in_looks(run, reported_on, picked).assign(set=names[1])
    return pd.concat([chosen.assign(set=names[0]), reported, again])


def _classifier_run(
    run: Run, reported_on: Sequence, *, chosen_on: Sequence, names: tuple[str, str], measure: str = "metric"
) -> pd.DataFrame:
    """Every all-but-one configuration on both sets (a classifier sweep is cheap); stacked with
    ``set`` from ``names`` (reported, chosen)."""
    return pd.concat(
        [
            run.effects(reported_on, "all_but_one", measure=measure).assign(set=names[0]),
            run.effects(chosen_on, "all_but_one", measure=measure).assign(set=names[1]),
        ]
    )


def tables(
    effects: pd.DataFrame, same: str, chosen: str, reported: str
) -> dict[int, tuple[pd.DataFrame, pd.DataFrame]]:
    """``{training seed: (chosen and reported on set `same`, chosen on `chosen` and reported on
    `reported`)}`` of each run's stacked ``effects``: Tables 2 and 5 with ``same`` = ``chosen``,
    Tables 3 and 6 with ``same`` = ``reported``."""
    out = {}
    for seed, part in effects.groupby("training_seed"):
        rows = {name: part[part["set"] == name] for name in (same, chosen, reported, _AGAIN.format(same))}
        same_table = best_per_layer(rows[same])
        if len(rows[_AGAIN.format(same)]):  # the chosen heads reported again, in two looks
            same_table = held_out(same_table, rows[_AGAIN.format(same)])
        out[int(seed)] = (same_table, held_out(best_per_layer(rows[chosen]), rows[reported]))
    return out


class _ClassifierSets(NamedTuple):
    """The classifier's two sets: the layers are reported on ``reported`` (``classifier_split``)
    and, in the held-out protocol, chosen on ``selection`` (``selection_split``)."""

    reported: list
    selection: list


class _TranslationSets(NamedTuple):
    """The translation model's two sets: the layers are chosen (and reported) on ``chosen_on``
    (``translation_split``) and reported again on ``heldout`` (``heldout_split``)."""

    chosen_on: list
    heldout: list


@dataclass(frozen=True)
class Protocols:
    """The chapter's two protocols per model: chosen and reported on one set (Tables 2 and 3), and
    chosen on one set, reported on another (Tables 5 and 6), run by ``sweeps`` on every training
    run of each model."""

    sweeps: HeadSweeps
    translation: str
    translation_split: str
    heldout_split: str
    classifier: str
    classifier_split: str
    selection_split: str

    def translation_effects(self, sets: _TranslationSets, measure: str = "metric") -> pd.DataFrame:
        """``_translation_run`` on every training run: chosen on ``sets.chosen_on``
        (``translation_split``), reported there and on ``sets.heldout`` (``heldout_split``)."""
        names = (self.translation_split, self.heldout_split)
        return self.sweeps.over_runs(
            self.translation,
            lambda run: _translation_run(run, sets.chosen_on, reported_on=sets.heldout, names=names, measure=measure),
        )

    def classifier_effects(self, sets: _ClassifierSets, measure: str = "metric") -> pd.DataFrame:
        """``_classifier_run`` on every training run: reported on ``sets.reported``
        (``classifier_split``), chosen on ``sets.selection`` (``selection_split``)."""
        names = (self.classifier_split, self.selection_split)
        return self.sweeps.over_runs(
            self.classifier,
            lambda run: _classifier_run(run, sets.reported, chosen_on=sets.selection, names=names, measure=measure),
        )

    def classifier_sets(self, max_examples: int, selection_examples: int) -> _ClassifierSets:
        """``max_examples`` of ``classifier_split`` (0: all) and ``selection_examples`` of
        ``selection_split``, drawn at random (every training run shares them)."""
        data = self.sweeps.data(self.classifier)
        return _ClassifierSets(
            course.subset(data[self.classifier_split], max_examples),
            course.subset(data[self.selection_split], selection_examples),
        )

    def translation_sets(self, max_examples: int) -> _TranslationSets:
        """``max_examples`` of ``translation_split`` and of ``heldout_split`` (0: all)."""
        data = self.sweeps.data(self.translation)
        return _TranslationSets(
            *(course.subset(data[s], max_examples) for s in (self.translation_split, self.heldout_split))
        )

    def classifier_line(self, effects: pd.DataFrame, sets: _ClassifierSets) -> str:
        """The classifier's unmasked accuracy per training run, and the sets it rests on."""
        return (
            f"{self.classifier}: accuracy unmasked by training seed {unmasked(effects, [self.classifier_split], 4)} "
            f"({len(sets.reported)} examples); heads chosen on {len(sets.selection)} {self.selection_split} examples"
        )

    def translation_line(self, effects: pd.DataFrame, sets: _TranslationSets) -> str:
        """The translation model's unmasked BLEU per training run on both splits, what it rests on,
        and, on a line of its own, the signature of the BLEU it scores."""
        decoded = len(self.sweeps.decoded(sets.chosen_on))
        again = effects[effects["set"] == _AGAIN.format(self.translation_split)]
        shown = [self.translation_split, self.heldout_split] if again.empty else [self.heldout_split]
        looked = (
            f"; the chosen heads reported in two looks over all {len(sets.chosen_on)} and {len(sets.heldout)} "
            f"pairs of the splits, BLEU unmasked there by training seed {unmasked(effects, shown, 2)}"
            if len(again)
            else f"; BLEU unmasked by training seed {unmasked(effects, shown, 2)}"
        )
        return (
            f"{self.translation}: heads chosen on {decoded} sentences decoded from {self.translation_split}, beam "
            f"{self.sweeps.beam}" + looked + "\n" + self.sweeps.bleu_definition(self.translation).signature()
        )

    def first_run_tables(self, effects: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Tables 2 and 5 of the translation model's first training run."""
        by_seed = self.translation_tables(effects)
        return by_seed[min(by_seed)]

    def translation_tables(self, effects: pd.DataFrame) -> dict:
        return tables(effects, self.translation_split, self.translation_split, self.heldout_split)

    def classifier_tables(self, effects: pd.DataFrame) -> dict:
        return tables(effects, self.classifier_split, self.selection_split, self.classifier_split)

    def classifier_side_by_side(self, classifier: pd.DataFrame) -> pd.DataFrame:
        """``classifier_side_by_side`` of the first training run's Tables 3 and 6."""
        by_seed = self.classifier_tables(classifier)
        return classifier_side_by_side(*by_seed[min(by_seed)], self.classifier_split, self.selection_split)

    def figure(self, translation: pd.DataFrame, classifier: pd.DataFrame, profile: str):
        """``figure`` on the first training run of each model's stacked effects, each on the set
        its layers are chosen and reported on (``translation_split``, ``classifier_split``),
        titled with ``profile``."""

        def first(effects: pd.DataFrame, name: str) -> pd.DataFrame:
            run = course.first_seed(effects)
            return run[run["set"] == name]

        return figure(
            first(translation, self.translation_split),
            first(classifier, self.classifier_split),
            (
                f"(a) {self.translation}: keep one head, {self.translation_split}",
                f"(b) {self.classifier}: keep one head, {self.classifier_split}",
            ),
            f"score change when a layer keeps a single head ({profile} profile)",
        )

    def counts(
        self,
        translation: pd.DataFrame,
        classifier: pd.DataFrame,
        likelihood: bool = False,
        margins: Mapping[str, float] | None = None,
    ) -> pd.DataFrame:
        """``counts`` of both models' stacked effects (the translation model first)."""
        same, other = _SAME_SET.format, _OTHER_SET.format
        return counts(
            [
                (
                    self.translation,
                    self.translation_tables(translation),
                    (same(self.translation_split), other(self.translation_split, self.heldout_split)),
                ),
                (
                    self.classifier,
                    self.classifier_tables(classifier),
                    (same(self.classifier_split), other(self.selection_split, self.classifier_split)),
                ),
            ],
            likelihood,
            margins,
            self.sweeps.bootstrap.alpha,
        )


def summary(
    rows: pd.DataFrame,
    source: str,
    *,
    protocol: str,
    likelihood: bool = False,
    heads_per_layer: int | None = None,
    margins: Mapping[str, float] | None = None,
    alpha: float | None = None,
) -> list[dict]:
    """One row per attention kind of one table: ``layers``, ``heads_per_layer`` (read off the
    all-but-one configurations' masks unless given), ``significant``, ``significant_down`` and the
    worst layer (1-based) with its change, in millinats (likelihood), accuracy points or BLEU.
    With ``margins`` (``equivalence.margin``): the ``margin`` in the score's unit, the layers whose
    change lies wholly below -margin (``harmful``), wholly within ±margin (``negligible``), wholly
    beyond +margin (``helpful``), across a margin (``undetermined``), and those neither test places
    (``unplaced``: not significant and undetermined), as ``equivalence.placement`` counts them.
    ``examples``, ``first_look_rows``, ``first_look_examples`` and ``resolution`` (in ``unit``)
    as in ``head_effects.significance_counts``: a layer's row may rest on the first look only.
    With ``margins`` and the tests' ``alpha`` too: ``examples_to_decide``, the examples that would
    place every unplaced layer at 80% power (``equivalence.examples_to_decide``)."""
    out = []
    for kind, part in rows.groupby("kind", sort=False):
        per_layer = heads_per_layer or len(part["heads"].iloc[0]) + 1
        worst = part.loc[part["delta"].idxmin()]
        scale, unit = (1000, "millinats") if likelihood else (100, "accuracy pts") if kind == "self" else (1, "BLEU")
        out.append(
            {
                "source": source,
                "protocol": protocol,
                "kind": kind,
                "layers": len(part),
                "heads_per_layer": per_layer,
                "significant": int(part["significant"].sum()),
                "significant_down": int((part["significant"] & (part["delta"] < 0)).sum()),
                "worst_layer": shown(worst["layer"]),
                "worst_delta": round(float(worst["delta"]) * scale, 2),
                "unit": unit,
            }
        )
        if "examples" in part:  # measured here (the paper's tables have no sample)
            out[-1].update(**sample_columns(part), resolution=resolution(part) * scale)
        if margins is not None:
            delta = equivalence.margin(
                "classifier" if kind == "self" else "translation", "likelihood" if likelihood else "metric", margins
            )
            placed = equivalence.placement(part, delta)
            out[-1].update(
                margin=delta,
                **{name: placed[name] for name in ("harmful", "negligible", "helpful", "undetermined", "unplaced")},
            )
            if "examples" in part and alpha is not None:  # measured here: what would place the unplaced layers
                out[-1].update(examples_to_decide=equivalence.examples_to_decide(part, delta, alpha))
    return out


def counts(
    per_model: Sequence[tuple[str, dict, tuple[str, str]]],
    likelihood: bool = False,
    margins: Mapping[str, float] | None = None,
    alpha: float | None = None,
) -> pd.DataFrame:
    """``summary`` of each model's ``tables`` on every seed: ``per_model`` holds (model name,
    its ``tables``, the protocols of its two tables); ``from_paper`` False."""
    rows = [
        {**row, "training_seed": seed, "from_paper": False}
        for name, by_seed, protocols in per_model
        for seed, pair in by_seed.items()
        for table, protocol in zip(pair, protocols)
        for row in summary(table, name, protocol=protocol, likelihood=likelihood, margins=margins, alpha=alpha)
    ]
    return pd.DataFrame(rows)


def with_paper(counts: pd.DataFrame) -> pd.DataFrame:
    """Our ``counts`` and the paper's (``paper_counts``) in one table."""
    return pd.concat([counts, paper_counts()], ignore_index=True)


def paper_counts() -> pd.DataFrame:
    """``summary`` of the paper's Tables 2 and 5 (WMT) and 3 and 6 (BERT), ``from_paper`` True."""
    return pd.DataFrame(
        [
            {**row, "from_paper": True}
            for table, model in ((2, "WMT"), (5, "WMT"), (3, "BERT"), (6, "BERT"))
            for row in summary(
                paper_values.effects(table),
                model,
                protocol=f"Table {table}",
                heads_per_layer=paper_values.HEADS_PER_LAYER[model],
            )
        ]
    )


def by_seed(table: pd.DataFrame) -> pd.DataFrame:
    """Our rows of a counts table: the layers down and the worst layer, one column per seed."""
    rows = []
    ours = table[~table["from_paper"].astype(bool)]
    for (source, protocol, seed), part in ours.groupby(["source", "protocol", "training_seed"], sort=False):
        worst = part.loc[part["worst_delta"].idxmin()]
        rows.append(
            {
                "model": source,
                "protocol": protocol,
                "training_seed": int(seed),
                "layers down": f"{int(part['significant_down'].sum())} of {int(part['layers'].sum())}",
                "worst layer": f"{worst['kind']} {worst['worst_layer']}: {worst['worst_delta']:+.2f} {worst['unit']}",
            }
        )
    return pd.DataFrame(rows).pivot(
        index=["model", "protocol"], columns="training_seed", values=["layers down", "worst layer"]
    )


def layers_down(metric: pd.DataFrame, likelihood: pd.DataFrame) -> pd.DataFrame:
    """The layers that drop significantly, of all, per model, protocol and seed, on both measures,
    and (where the tables have a margin) those whose change lies wholly below -δ."""

    def down(table: pd.DataFrame, column: str, label: str) -> pd.Series:
        rows = table[~table["from_paper"].astype(bool)]
        return (
            rows.groupby(["source", "protocol", "training_seed"], sort=False)
            .apply(lambda p: f"{int(p[column].sum())} of {int(p['layers'].sum())}", include_groups=False)
            .rename(label)
        )

    columns = [
        down(table, column, f"layers {what} ({name})")
        for table, name in ((metric, measures.METRIC.name), (likelihood, measures.LIKELIHOOD.name))
        for column, what in (("significant_down", "down"), ("harmful", "beyond δ"))
        if column in table
    ]
    return pd.concat(columns, axis=1).reset_index()


def classifier_side_by_side(same: pd.DataFrame, other: pd.DataFrame, chosen: str, selection: str) -> pd.DataFrame:
    """Tables 3 and 6 beside ours: per layer, the head kept and the change in accuracy points."""

    def kept(rows: pd.DataFrame) -> pd.Series:
        return pd.Series(
            [shown(kept_head(h)) for h in rows["heads"]], index=[shown(i) for i in rows["layer"]], dtype="Int64"
        )

    return (
        pd.concat(
            {
                ("ours: chosen on " + chosen, "kept head"): kept(same),
                ("ours: chosen on " + chosen, "Δacc (pts)"): layer_table(same, scale=100)["self"],
                ("paper Table 3", "Δacc (pts)"): layer_table(paper_values.effects(3), scale=100)["self"],
                ("ours: chosen on " + selection, "kept head"): kept(other),
                ("ours: chosen on " + selection, "Δacc (pts)"): layer_table(other, scale=100)["self"],
                ("paper Table 6", "Δacc (pts)"): layer_table(paper_values.effects(6), scale=100)["self"],
            },
            axis=1,
        )
        .rename_axis("layer")
        .astype(object)
        .fillna("")
    )


def _change_strip(ax, effects: pd.DataFrame, *, scale: float, title: str, ylabel: str) -> None:
    """Every all-but-one configuration's change (``delta * scale``) by layer, one dot each, on ``ax``."""
    import seaborn as sns

    df = effects.assign(change=effects["delta"] * scale, layer1=effects["layer"].map(shown))
    several = df["kind"].nunique() > 1
    sns.stripplot(
        data=df,
        x="layer1",
        y="change",
        hue="kind" if several else None,
        dodge=several,
        ax=ax,
        size=4,
        alpha=0.7,
        legend=several,
    )
    ax.axhline(0, color="red", linestyle="--", linewidth=1)
    ax.set(title=title, xlabel="layer", ylabel=ylabel)


def unmasked(effects: pd.DataFrame, sets: Sequence[str], digits: int) -> str:
    """Each training run's unmasked score on each of ``sets`` (stacked ``effects`` with ``set``):
    ``"0: test13 19.46, test14 18.20; 1: ..."``."""
    return "; ".join(
        f"{int(seed)}: "
        + ", ".join(f"{name} {part.loc[part['set'] == name, 'base'].iloc[0]:.{digits}f}" for name in sets)
        for seed, part in effects.groupby("training_seed")
    )


def beside_paper(ours: pd.DataFrame, table: int) -> pd.DataFrame:
    """``layer_table`` of one of our keep-one tables beside the paper's Table ``table``."""
    return pd.concat(
        {"ours": layer_table(ours), f"paper Table {table}": layer_table(paper_values.effects(table))}, axis=1
    )


def figure(translation: pd.DataFrame, classifier: pd.DataFrame, titles: tuple[str, str], suptitle: str):
    """Figure 2's strips from one training run's rows on one set each: BLEU changes left,
    accuracy changes (points) right. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    _change_strip(axes[0], translation, scale=1, title=titles[0], ylabel="BLEU change")
    _change_strip(axes[1], classifier, scale=100, title=titles[1], ylabel="accuracy change (pts)")
    fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


CHAPTER = "04_keeping_one_head"
COUNTS = "04_keep_one_counts"
TRANSLATION = "04_keep_one_translation"
_HELD_OUT_LEVEL = 0.05  # "more layers down held out": McNemar's one-sided exact p below this
_QUARTER = 0.25  # "the last Enc-Dec layer needs its heads": it loses at least this share of the BLEU
_BEYOND_MARGIN_RULE = (
    "the same rule, counting the layers whose change lies wholly below -δ (chapter 04's margins) "
    "instead of the significant drops, and as undecided those whose interval straddles a margin"
)
_UNDECIDED = (
    "; read over every count the undecided layers allow (neither test places them: not significant, not shown "
    "within ±δ): partly where it holds at least in part over all of them, cannot tell where they could refute it"
)


def _keep_one(r: Results, track: str, held_out: bool) -> pd.DataFrame:
    counts = ours(r[COUNTS])
    counts = counts[counts["source"].str.endswith(track)]
    chosen_on_reported = counts["protocol"].str.startswith("chosen and reported")
    return present(counts[~chosen_on_reported if held_out else chosen_on_reported], f"{COUNTS}: {track}")


def _layers_down(part: pd.DataFrame, r: Results) -> tuple[int, int, str]:
    """``(down, undecided, text)``: the layers that lose with one head and those the tests leave
    undecided. On the paper's metric the layers down drop significantly, and the undecided are
    those neither test places (not significant, not within ±δ: ``unplaced``); on the likelihood
    the layers down lie wholly beyond -δ (``harmful``, the significant drops shown beside them: a
    likelihood finds thousandths of a nat significant) and the undecided straddle a margin
    (``undetermined``). A table from before these were counted has none undecided. Over several
    seeds' rows, the layers of every seed are counted."""
    significant = int(part["significant_down"].sum())
    column = "undetermined" if r.measure else "unplaced"
    undecided = int(part[column].sum()) if column in part else 0
    beside = f", {undecided} undecided" if undecided else ""
    if undecided and not r.measure and "examples_to_decide" in part:  # the power reached, and what it would take
        reached, needed = int(part["examples"].max()), int(part["examples_to_decide"].max())
        beside += f" on up to {reached:,} examples (about {needed:,} would place each at 80% power)"
    if not r.measure:
        return significant, undecided, f"{significant}{beside}"
    beyond = int(part["harmful"].sum())
    return beyond, undecided, f"{beyond} beyond δ ({significant} significant{beside})"


def _of_seeds(r: Results) -> str:
    return f" ({len(r.seeds)} seeds' layers together)" if len(r.seeds) > 1 else ""


def most_layers_one_head(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False)
    down, undecided, text = _layers_down(part, r)
    layers = int(part["layers"].sum())
    # "most layers": refuted as soon as more than half drop, not only when every layer does
    most = lambda d: REPRODUCED if d <= layers / 2 else NOT_REPRODUCED
    return f"{text} of {layers} layers{_of_seeds(r)}", over_counts(most, down, undecided)


def bert_layers_one_head(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "nli", held_out=False)
    down, undecided, text = _layers_down(part, r)
    layers = int(part["layers"].sum())
    none = lambda d: three_way(d == 0, d <= layers / 4)
    return f"{text} of {layers} layers{_of_seeds(r)}", over_counts(none, down, undecided)


# ---- the last Enc-Dec layer ---------------------------------------------------------------------
def _layers(r: Results, held_out: bool = False) -> pd.DataFrame:
    """The translation model's per-layer rows under a protocol (``per_layer``), every seed
    of ``r``, with each layer's change relative to its seed's unpruned score (``relative``) and
    that change's standard error read off its bootstrap interval (``relative_se``: the alpha and 1 -
    alpha quantiles, so the width over 2 z(1 - alpha))."""
    part = _keep_one(r, "translation", held_out=held_out)
    protocol, margin = part["protocol"].iloc[0], float(part["margin"].iloc[0]) if "margin" in part else 0.0
    rows = per_layer(r[TRANSLATION], protocol, bool(r.measure), margin)
    se = interval_se(rows, r.params.get("alpha", 0.01))
    scale = rows["base"].where(rows["base"] != 0) if not r.measure else 1.0
    return rows.assign(relative=rows["delta"] / scale, relative_se=se / scale)


def _pooled_layers(rows: pd.DataFrame) -> dict[tuple[str, int], object]:
    """Per (kind, layer): its relative change pooled over the seeds (``pooling.mean_over_seeds``)."""
    return {
        (kind, int(layer)): mean_over_seeds(part["relative"], part["relative_se"])
        for (kind, layer), part in rows.groupby(["kind", "layer"], sort=False)
    }


def _could_be_worst(pooled: dict) -> list:
    """The layers whose interval reaches below the highest end of every other's: any of them may
    truly be the worst (near-ties are not broken by point estimates)."""
    ceiling = min(p.high for p in pooled.values())
    return [layer for layer, p in pooled.items() if p.low <= ceiling]


def last_enc_dec(r: Results) -> tuple[str, str]:
    """The claim names the last Enc-Dec layer: it must be the worst Enc-Dec layer (the only one
    whose interval could be the worst: ``_could_be_worst``) and lose a quarter of the BLEU itself
    (its own interval wholly below -``_QUARTER``); partly: one of the two. Read over every state
    the intervals allow (``supported``): a near-tie for the worst, or an interval across a quarter,
    leaves both possibilities open."""
    rows = _layers(r)
    if rows["relative"].isna().any():  # an unpruned BLEU of 0: no share of it to lose
        return "(the unpruned BLEU is 0: no share of it to lose)", CANNOT_TELL
    enc_dec = rows[rows["kind"] == "enc_dec"]
    pooled = _pooled_layers(enc_dec)
    last = max(pooled)
    candidates = _could_be_worst(pooled)
    own = pooled[last]
    worst = {c == last for c in candidates}
    quarter = {v for v, holds in ((True, own.low <= -_QUARTER), (False, own.high > -_QUARTER)) if holds}
    verdict = supported(three_way(w and q, w or q) for w in worst for q in quarter)
    others = [shown(layer) for kind, layer in candidates if (kind, layer) != last]
    text = (
        f"last Enc-Dec layer ({shown(last[1])}): {interval(own.x, own.low, own.high, '{:+.0%}')} of the BLEU"
        + (f"; layer{'s' * (len(others) > 1)} {', '.join(map(str, others))} could be worse" if others else "")
        + _of_seeds(r)
    )
    return text, verdict


def _last_enc_dec_likelihood(r: Results) -> tuple[str, str]:
    """On the likelihood: the worst layer of all kinds must be the last Enc-Dec layer; partly: an
    Enc-Dec layer; read over every layer that could be the worst (``_could_be_worst``)."""
    pooled = _pooled_layers(_layers(r))
    last = ("enc_dec", max(layer for kind, layer in pooled if kind == "enc_dec"))
    candidates = _could_be_worst(pooled)
    verdict = supported(three_way(c == last, c[0] == "enc_dec") for c in candidates)
    could = ", ".join(f"{k} {shown(layer)} ({pooled[(k, layer)].x * 1000:+.1f} millinats)" for k, layer in candidates)
    return f"the worst layer could be: {could}{_of_seeds(r)}", verdict


# ---- held out against the reported set ------------------------------------------------------------
def held_out_worse(r: Results) -> tuple[str, str]:
    """More layers down held out than chosen on the reported set. The layers are paired (the same
    layer of the same model under two protocols), so the test is McNemar's on the discordant
    layers: one-sided exact p < ``_HELD_OUT_LEVEL`` for "reproduced". "Not reproduced" needs the
    data to exclude the paper's effect: the upper 95% bound on the share of layers held out costs
    beyond the reported set (``_excess_bound``) below the paper's (Table 5's layers down less
    Table 2's, ``_paper_effect``).
    Read over every way the undecided layers could fall (``supported``)."""
    held, same = _layers(r, held_out=True), _layers(r, held_out=False)
    pairs = held.merge(same, on=["training_seed", "kind", "layer"], suffixes=("_held", "_same"))
    layers, effect = len(pairs), _paper_effect(r)
    states = {}
    for name, held_down, same_down in (
        ("as seen", pairs["down_held"], pairs["down_same"]),
        ("undecided for", pairs["down_held"] | pairs["undecided_held"], pairs["down_same"]),
        ("undecided against", pairs["down_held"], pairs["down_same"] | pairs["undecided_same"]),
    ):
        b, c = int((held_down & ~same_down).sum()), int((same_down & ~held_down).sum())
        states[name] = (b, c, _mcnemar_p(b, c), _excess_bound(b, c, layers))
    verdicts = {
        REPRODUCED if p < _HELD_OUT_LEVEL else NOT_REPRODUCED if bound < effect else CANNOT_TELL
        for b, c, p, bound in states.values()
    }
    b, c, p, bound = states["as seen"]
    text = (
        f"{int(pairs['down_held'].sum())} of {layers} layers down held out, {int(pairs['down_same'].sum())} chosen on "
        f"the reported set; {b} down only held out, {c} only on the reported set (McNemar one-sided p = {p:.2g}; "
        f"at most {bound:.0%} more layers down held out, 95% bound; the paper: {effect:.0%})"
    )
    undecided = int(pairs["undecided_held"].sum()), int(pairs["undecided_same"].sum())
    if any(undecided):  # the evidence the reading over them rests on
        ps, bounds = [s[2] for s in states.values()], [s[3] for s in states.values()]
        text += (
            f"; {undecided[0]} layers undecided held out and {undecided[1]} on the reported set: over every way "
            f"they fall, p {min(ps):.2g} to {max(ps):.2g} and the bound {min(bounds):.0%} to {max(bounds):.0%}"
        )
    return text + _of_seeds(r), supported(verdicts)


def _mcnemar_p(b: int, c: int) -> float:
    """McNemar's exact one-sided p that ``b`` (layers down only held out) exceeds ``c`` (down only
    on the reported set) by more than chance: P(Binomial(b + c, 1/2) >= b); 1 with no discordant layer."""
    from scipy.stats import binom

    return float(binom.sf(b - 1, b + c, 0.5)) if b + c else 1.0


def _excess_bound(b: int, c: int, layers: int, level: float = 0.05) -> float:
    """A one-sided upper ``1 - level`` bound on the share of layers that held out costs beyond the
    reported set: the Clopper-Pearson bound on ``b`` (layers down only held out) of ``layers``.
    The excess is b - c over the layers, at most b's share, so the bound holds whatever ``c`` is
    and however many layers happen to be discordant."""
    from scipy.stats import beta

    return 1.0 if b >= layers else float(beta.ppf(1 - level, b + 1, layers - b))


def _paper_effect(r: Results) -> float:
    """The paper's share of layers that held out costs beyond the reported set: its Table 5's
    layers down less its Table 2's, over Table 2's layers (``paper_counts``; the paper
    measured no likelihood, so both measures read it)."""
    paper = paper_counts()
    wmt = paper[paper["source"] == "WMT"]
    down = wmt.groupby("protocol")["significant_down"].sum()
    return float(down["Table 5"] - down["Table 2"]) / int(wmt.loc[wmt["protocol"] == "Table 2", "layers"].sum())


# ---- between seeds --------------------------------------------------------------------------------
def _layers_down_statistic(track: str, held_out: bool = False):
    """A claim's statistic for the between-seed test: the layers down (as ``_layers_down`` counts
    them on the measure) of ``track``'s table chosen on the reported set, and held out too, with
    the undecided layers beside them."""

    def statistic(r: Results) -> dict[str, Share]:
        out = {}
        for protocol in (False, True) if held_out else (False,):
            part = _keep_one(r, track, held_out=protocol)
            down, undecided, _ = _layers_down(part, r)
            out[f"{track}, {'held out' if protocol else 'chosen on the reported set'}"] = Share(
                down, int(part["layers"].sum()), undecided
            )
        return out

    return statistic


def _last_layer_statistic(r: Results) -> dict[str, Value]:
    """``last_enc_dec``'s statistic: the last Enc-Dec layer's relative change with its error (on
    the likelihood, the worst layer's change)."""
    rows = _layers(r)
    if not r.measure:
        rows = rows[rows["kind"] == "enc_dec"]
    row = rows.loc[rows["layer"].idxmax()] if not r.measure else rows.loc[rows["relative"].idxmin()]
    return {
        "the last Enc-Dec layer" if not r.measure else "the worst layer": Value(row["relative"], row["relative_se"])
    }


def counts_sample(r: Results) -> str:
    return samples.one_head(r[COUNTS])


CLAIMS = [
    Claim(
        "most_layers_one_head",
        "§3.3, Table 2",
        "Most layers can be reduced to one head (head chosen on the reported set)",
        "4 of 18 WMT layers drop significantly (5 change significantly, one of them a gain)",
        "reproduced: at most half the layers drop significantly; not reproduced: more than half" + _UNDECIDED,
        CHAPTER,
        most_layers_one_head,
        likelihood=True,
        likelihood_rule=_BEYOND_MARGIN_RULE,
        sample=counts_sample,
        seed_statistic=_layers_down_statistic("translation"),
    ),
    Claim(
        "last_enc_dec",
        "§3.3, Table 2",
        "The last Enc-Dec layer is the exception: it needs its heads",
        "-13.56 BLEU of 36.05 with one head",
        f"reproduced: the last Enc-Dec layer is the worst of its kind (no other's interval reaches its) and itself "
        f"loses at least {_QUARTER:.0%} of the BLEU (its whole interval); partly: one of the two; cannot tell: an "
        "unpruned BLEU of 0 (no share of it to lose); read over every state the intervals leave open",
        CHAPTER,
        last_enc_dec,
        likelihood=_last_enc_dec_likelihood,
        likelihood_rule="reproduced: the worst layer of all kinds is the last Enc-Dec layer; partly: an Enc-Dec "
        "layer; read over every layer whose interval could make it the worst",
        parameters={"alpha": 0.01},
        sample=counts_sample,
        seed_statistic=_last_layer_statistic,
    ),
    Claim(
        "bert_layers_one_head",
        "§3.3, Table 3",
        "No BERT layer needs more than one head",
        "0 of 12 layers drop significantly",
        "reproduced: no layer drops significantly; partly: at most a quarter" + _UNDECIDED,
        CHAPTER,
        bert_layers_one_head,
        likelihood=True,
        likelihood_rule=_BEYOND_MARGIN_RULE,
        sample=counts_sample,
        seed_statistic=_layers_down_statistic("nli"),
    ),
    Claim(
        "held_out_worse",
        "App. A, Table 5",
        "Choosing the head on other data than the reported set costs more layers",
        "9 of 18 WMT layers drop (4 when chosen on the reported set)",
        "reproduced: more layers drop held out than chosen on the reported set, by McNemar's one-sided exact test "
        f"on the paired layers (p < {_HELD_OUT_LEVEL}); not reproduced: the 95% upper bound on the share of layers "
        "down only held out (which bounds the extra share) is below the paper's extra share (Table 5's layers down "
        "less Table 2's, over its layers); cannot tell: neither; read over every way the undecided layers could fall",
        CHAPTER,
        held_out_worse,
        likelihood=True,
        likelihood_rule=_BEYOND_MARGIN_RULE,
        parameters={"alpha": 0.01},
        sample=counts_sample,
        seed_statistic=_layers_down_statistic("translation", held_out=True),
    ),
]


def findings(tables: ChapterTables) -> str:
    """Chapter 04's findings: each model's heads per layer beside the paper's; per model, protocol,
    measure and seed, the layers that keep their score with one head, and the worst layer."""
    first = ours(tables["04_keep_one_counts"])
    lines = [
        heads_per_layer_line(
            [
                (str(name), int(part["heads_per_layer"].iloc[0]), paper_model(part["kind"]))
                for name, part in first.groupby("source", sort=False)
            ]
        )
    ]
    for suffix, measure in MEASURES:
        counts = ours(tables[f"04_keep_one_counts{suffix}"])
        for (source, protocol), part in counts.groupby(["source", "protocol"], sort=False):
            name = str(source)
            kept, worst, beyond = [], [], []
            for seed, rows in part.groupby("training_seed", sort=True):
                layers, down = int(rows["layers"].sum()), int(rows["significant_down"].sum())
                kept.append(f"{layers - down} of {layers}")
                if "harmful" in rows and rows["harmful"].notna().all():
                    beyond.append(str(int(rows["harmful"].sum())))
                w = rows.loc[rows["worst_delta"].idxmin()]
                worst.append(
                    f"{w['kind']} layer {int(w['worst_layer'])} ({w['worst_delta']:+.2f} {w['unit']}, seed "
                    f"{int(seed)})"
                )
            kinds = {w.split(" layer")[0] for w in worst}
            margin = (
                f" {words(beyond)} lose more than the margin δ: their interval lies wholly below "
                f"-{part['margin'].iloc[0]:.3g}."
                if beyond
                else ""
            )
            lines.append(
                f"**{name}, {protocol}, {measure}.** With a single head, {words(kept)} layers show no significant "
                f"loss (seed by seed).{margin} The worst layer is {words(worst)}"
                + (f", always {kinds.pop()}." if len(kinds) == 1 else ".")
            )
    return "\n\n".join(lines)
