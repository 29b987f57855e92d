"""The registry of the paper's claims: the one place that decides whether a claim holds.

Every claim states the paper's value (../shared/paper/REFERENCE.md), reads ours from the CSV
tables the chapters saved (results/<profile>/), and applies the rule written next to it, which
gives one of three verdicts: ``reproduced``, ``partly`` or ``not reproduced``. A claim whose
chapter has not run on the profile is ``not run``. Nothing here is typed in by hand except the
paper's side and the rules. A chapter's "Against the paper" cell (``chapter_verdicts``), its
"What this run shows" text (``findings``) and the scorecard (``scorecard``) all print these
verdicts; no other code judges a claim.

A rule's parameters that a chapter also has (chapter 09's ``min_base_share``) are the
chapter's: ``chapter_verdicts`` records the values the chapter ran with under
``results/<profile>/parameters/<chapter>.json``, and the scorecard reads them, so a chapter
rerun with ``-p min_base_share=0.05`` changes the chapter and the scorecard alike.

Where the chapters measured several training runs of a model (a ``training_seed`` column in
their tables), each claim is checked on every seed's rows on their own (the paper's rows, with
no seed, go with every seed). The verdict is the seeds' common verdict when they agree, and
``depends on the seed`` when they do not: a claim is ``reproduced`` only if it holds for every
seed. A seed is checked on a claim only where every model in the tables the claim reads has a
run with that seed (the ``seeds`` column lists those checked).

Each claim is judged once per measure (``MEASURES``): on the paper's metric (BLEU, accuracy)
and, for the chapters that measured it, on the likelihood (``..._likelihood`` tables: the
reference's log-likelihood per token, the gold label's log-probability), by the same rule
unless the claim names one of its own (``likelihood_rule``); a claim whose chapter has no
likelihood tables is ``not measured`` there. ``disagreements`` lists the claims whose two
verdicts differ. A table's rows from the paper carry ``from_paper = True``.

    from helpers.book.verdicts.scorecard import chapter_verdicts, scorecard
    scorecard("course")   # DataFrame: section, claim, paper, ours, verdict, likelihood, ..., rule, chapter
    chapter_verdicts("course", "09_training_dynamics", min_base_share=0.02)   # one row per claim, measure, seed
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ...heads.atomic import atomic_path
from . import paper_values
from ..store.columns import IN_SAMPLE, MIN_BAND_ORDERS, RANDOM_HIGH, RANDOM_LOW
from ..store.results import results_root as default_results_root

REPRODUCED, PARTLY, NOT_REPRODUCED, NOT_RUN = "reproduced", "partly", "not reproduced", "not run"
NOT_MEASURED = "not measured"  # the likelihood verdict of a claim whose chapter has no likelihood tables
LIKELIHOOD = "_likelihood"     # the suffix of a chapter's likelihood tables
METRIC, LIKELIHOOD_NAME = "the paper's metric", "the likelihood"
MEASURES = {"": METRIC, LIKELIHOOD: LIKELIHOOD_NAME}  # table suffix -> the measure's one name
FROM_PAPER = "from_paper"      # the column that marks a table's rows from the paper
DEPENDS_ON_SEED = "depends on the seed"
CANNOT_TELL = "cannot tell"    # the data lack the power to decide: too few heads placed by the tests
VERDICTS = (REPRODUCED, PARTLY, DEPENDS_ON_SEED, CANNOT_TELL, NOT_REPRODUCED, NOT_RUN)
SEED = "training_seed"
IDENTITY_COLUMNS = ("model", "source", "track")  # the column that names the model of a row, by table
SHARE_TOLERANCE = 0.10  # "about 20% prunable" is met within 10 points of the share of heads
BEYOND_MARGIN_RULE = ("the same rule, counting the layers whose change lies wholly below -δ (chapter 04's margins) "
                      "instead of the significant drops")
FEW_SHARE = 0.20        # "few heads matter alone": under this share of a model's heads significant
UNDERPOWERED = 0.50     # a model's one-head tests "cannot tell" when more than this share of its heads is placed by neither test
STRONG_R = 0.40         # "effects in domain predict effects out of domain": Pearson r at least this
MIN_BASE_SHARE = 0.02   # chapter 09's default: epochs whose unpruned BLEU is below this share of the last one's are skipped


class MissingResults(LookupError):
    pass


class NoUsableBLEU(ValueError):
    """A claim on BLEU's share kept, where no checkpoint has a BLEU to keep a share of."""


class SeedNotRun(LookupError):
    """A table has rows for other training seeds but none for this one (e.g. a model trained
    with fewer seeds than another)."""


class Results:
    """The CSV tables of one profile, read on demand: ``results["06_prunable_shares"]``; with a
    ``training_seed``, the rows of that seed (and rows without a seed, such as the paper's)."""

    def __init__(self, folder: Path, training_seed: int | None = None, measure: str = "",
                 params: dict[str, Any] | None = None):
        self.folder = Path(folder)
        self.training_seed = training_seed
        self.measure = measure  # "" (the paper's metric) or LIKELIHOOD: the suffix of the tables read
        self.params = dict(params or {})  # the rule's parameters, as the claim's chapter ran with them

    def __getitem__(self, name: str) -> pd.DataFrame:
        path = self.folder / f"{name}{self.measure}.csv"
        if not path.exists():
            raise MissingResults(name)
        table = pd.read_csv(path)
        if self.training_seed is None or SEED not in table:
            return table
        seeded = table[SEED].notna()
        mine = table[SEED] == self.training_seed
        if seeded.any() and not mine.any():
            raise SeedNotRun(name)
        # a seed counts only where it has every model the table has (e.g. a classifier's third
        # seed, in a table that also holds a translation model trained with two seeds, does not)
        model = next((c for c in IDENTITY_COLUMNS if c in table), None)
        if model and set(table.loc[seeded, model]) - set(table.loc[mine, model]):
            raise SeedNotRun(name)
        return table[~seeded | mine].reset_index(drop=True)

    def training_seeds(self) -> list[int]:
        """Every training seed found in the profile's tables, in order."""
        seeds: set[int] = set()
        for path in sorted(self.folder.glob("*.csv")):
            columns = pd.read_csv(path, nrows=0).columns
            if SEED in columns:
                seeds.update(int(s) for s in pd.read_csv(path, usecols=[SEED])[SEED].dropna().unique())
        return sorted(seeds)

    def for_seed(self, training_seed: int) -> "Results":
        return Results(self.folder, training_seed, self.measure, self.params)

    def with_params(self, params: dict[str, Any]) -> "Results":
        return Results(self.folder, self.training_seed, self.measure, params)


@dataclass(frozen=True)
class Claim:
    key: str   # a short name, e.g. "few_significant"
    section: str
    claim: str
    paper: str
    rule: str
    chapter: str
    check: Callable[[Results], tuple[str, str]]  # -> (ours, verdict)
    # on the likelihood tables: True: ``check`` itself; a function: its own check (and
    # ``likelihood_rule``); False: the chapter does not measure the likelihood
    likelihood: bool | Callable[[Results], tuple[str, str]] = False
    likelihood_rule: str = "the same rule"
    # the rule's parameters that are also the chapter's, with the chapter's defaults (a test
    # keeps them equal to the notebook's parameters cell)
    parameters: dict[str, Any] = field(default_factory=dict)
    # what ``check`` reads when it is not the paper's metric (claims beyond the paper): the
    # chapters' verdict lines and tables name it instead of "the paper's metric"
    measured_on: str = ""
    # the counts table whose rows carry the one-head tests' sample (``examples``) and
    # ``resolution``: the scorecard shows them beside the verdict (``sample_text``)
    sample_table: str = ""


def ours(table: pd.DataFrame) -> pd.DataFrame:
    """Our rows of a table that also holds the paper's (``from_paper`` True on the paper's rows)."""
    if FROM_PAPER not in table:
        return table
    return table[~table[FROM_PAPER].fillna(False).astype(bool)]


def _present(rows: pd.DataFrame, what: str) -> pd.DataFrame:
    """``rows``, or ``SeedNotRun`` when there are none: the seed has no run of that model."""
    if rows.empty:
        raise SeedNotRun(what)
    return rows


def _three_way(full: bool, some: bool) -> str:
    return REPRODUCED if full else PARTLY if some else NOT_REPRODUCED


def _within(ours: float, paper: float, tolerance: float = SHARE_TOLERANCE) -> bool:
    return abs(ours - paper) <= tolerance + 1e-9


# ---- §3: one head at a time ----------------------------------------------------------------
def _by_model(holds: pd.Series, undecided: pd.Series) -> str:
    """A claim checked model by model: reproduced when it holds for every model, partly for some;
    where it holds for none, ``cannot tell`` if the tests left some model undecided, else not
    reproduced."""
    if holds.any():
        return _three_way(holds.all(), True)
    return CANNOT_TELL if undecided.any() else NOT_REPRODUCED


def _few_significant(r: Results) -> tuple[str, str]:
    """Few heads significant means little where the tests place few heads at all: a model whose
    heads are mostly placed by neither test (not significant, interval across the margin) is
    undecided, not a model where few heads matter."""
    table = ours(r["03_one_head_counts"])
    columns = ["heads", "significant"] + (["unplaced"] if "unplaced" in table else [])
    counts = table.groupby("model")[columns].sum()
    shares = counts["significant"] / counts["heads"]
    unplaced = counts["unplaced"] / counts["heads"] if "unplaced" in counts else shares * 0
    underpowered = unplaced > UNDERPOWERED
    text = "; ".join(f"{m} {int(row['significant'])}/{int(row['heads'])}"
                     + (f" ({int(row['unplaced'])} placed by neither test)" if underpowered[m] else "")
                     for m, row in counts.iterrows())
    return text, _by_model((shares < FEW_SHARE) & ~underpowered, (shares < FEW_SHARE) & underpowered)


def _most_negligible(r: Results) -> tuple[str, str]:
    """Over 80% negligible per model; where fewer are, but the undetermined heads could still
    make it so, the model is undecided (``cannot tell``) rather than a refutation."""
    counts = ours(r["03_one_head_counts"]).groupby("model")[["heads", "negligible", "undetermined", "unplaced"]].sum()
    shares = counts["negligible"] / counts["heads"]
    could = (counts["negligible"] + counts["undetermined"]) / counts["heads"]
    text = "; ".join(f"{m} {int(row['negligible'])}/{int(row['heads'])} negligible, {int(row['undetermined'])} "
                     f"undetermined ({int(row['unplaced'])} placed by neither test)" for m, row in counts.iterrows())
    holds = shares > 1 - FEW_SHARE
    return text, _by_model(holds, ~holds & (could > 1 - FEW_SHARE))


GAIN_LEVEL = 0.05   # significant gains count as real when more than chance gives (one-sided binomial p below this)


def _some_gain(r: Results) -> tuple[str, str]:
    """A test at alpha flags gains in about alpha of the heads with no effect (one direction), so
    one significant gain among hundreds of heads is what chance gives: the gains must outnumber
    it (binomial, ``GAIN_LEVEL``). On the likelihood a gain must lie beyond +δ, which chance
    alone makes rarer still."""
    from scipy.stats import binom

    from ...heads.significance import chance_flag_rate

    counts = ours(r["03_one_head_counts"])
    up, heads = int(counts["significant_up"].sum()), int(counts["heads"].sum())
    expected = chance_flag_rate(r.params["alpha"], one_direction=True) * heads
    beyond = bool(up and binom.sf(up - 1, heads, chance_flag_rate(r.params["alpha"], one_direction=True)) < GAIN_LEVEL)
    text = f"{up} of {int(counts['significant'].sum())} significant changes are gains ({expected:.1f} expected by chance)"
    if r.measure:
        helpful = int(counts["helpful"].sum())
        return f"{helpful} gains beyond δ ({text})", REPRODUCED if helpful else PARTLY if up else NOT_REPRODUCED
    return text, REPRODUCED if beyond else PARTLY if up else NOT_REPRODUCED


REMOVAL_CHAPTER = "12_unimportant_or_unmeasured"


class _OneRemoval(Results):
    """``r`` as chapter 03's tables would read if heads were removed by ``removal`` (zero, mean or
    resample): ``03_one_head_counts`` is chapter 12's ``12_removal_counts`` rows of that kind."""

    def __init__(self, r: Results, removal: str):
        super().__init__(r.folder, r.training_seed, r.measure, r.params)
        self.removal = removal

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name != "03_one_head_counts":
            return super().__getitem__(name)
        table = super().__getitem__("12_removal_counts")
        return _present(table[table["removal"] == self.removal], f"12_removal_counts: {self.removal}")


def _every_removal(check: Callable[[Results], tuple[str, str]]) -> Callable[[Results], tuple[str, str]]:
    """Chapter 03's ``check`` applied to the counts of each way of removing a head: reproduced
    when it is reproduced under every one, partly when under some (or partly under any)."""
    def judged(r: Results) -> tuple[str, str]:
        found = {kind: check(_OneRemoval(r, kind)) for kind in dict.fromkeys(r["12_removal_counts"]["removal"])}
        verdicts = [v for _, v in found.values()]
        text = "; ".join(f"{kind}: {t} ({v})" for kind, (t, v) in found.items())
        if not any(v in (REPRODUCED, PARTLY) for v in verdicts) and CANNOT_TELL in verdicts:
            return text, CANNOT_TELL
        return text, _three_way(all(v == REPRODUCED for v in verdicts), any(v in (REPRODUCED, PARTLY) for v in verdicts))
    return judged


REMOVAL_RULES = {"few_significant": _few_significant, "most_negligible": _most_negligible}


def by_removal(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """Chapter 03's two rules under each way of removing a head, one row per rule, measure, training
    seed and removal kind (zero, mean, resample), from chapter 12's ``12_removal_counts`` tables:
    which verdicts change with the kind. Columns: key, measure, training_seed, removal, ours, verdict."""
    folder = _folder(profile, results_root)
    rows = []
    for measure, name in MEASURES.items():
        results = Results(folder, measure=measure)
        try:
            kinds = list(dict.fromkeys(results["12_removal_counts"]["removal"]))
        except MissingResults:
            continue
        for key, check in REMOVAL_RULES.items():
            for kind in kinds:
                try:
                    found = _per_seed(CLAIMS_BY_KEY[key], lambda r: check(_OneRemoval(r, kind)), results)
                except MissingResults:  # no seed with every model (a profile that trains none)
                    continue
                rows += [{"key": key, "measure": name, "training_seed": seed, "removal": kind, "ours": text,
                          "verdict": verdict} for seed, (text, verdict) in found.items()]
    return pd.DataFrame(rows, columns=["key", "measure", "training_seed", "removal", "ours", "verdict"])


def removal_table(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """``by_removal`` laid out to read: one row per rule, measure and training seed, one verdict
    column per removal kind."""
    table = by_removal(profile, results_root)
    if table.empty:
        return table
    kinds = list(dict.fromkeys(table["removal"]))
    return table.pivot_table(index=["key", "measure", "training_seed"], columns="removal", values="verdict",
                             aggfunc="first")[kinds]


def _keep_one(r: Results, track: str, held_out: bool) -> pd.DataFrame:
    counts = ours(r["04_keep_one_counts"])
    counts = counts[counts["source"].str.endswith(track)]
    chosen_on_reported = counts["protocol"].str.startswith("chosen and reported")
    return _present(counts[~chosen_on_reported if held_out else chosen_on_reported], f"04_keep_one_counts: {track}")


def _layers_down(part: pd.DataFrame, r: Results) -> tuple[int, str]:
    """The layers that lose with one head: on the paper's metric those that drop significantly; on
    the likelihood those whose change lies wholly beyond -δ (``harmful``), the significant drops
    shown beside them (a likelihood finds thousandths of a nat significant)."""
    significant = int(part["significant_down"].sum())
    if not r.measure:
        return significant, str(significant)
    beyond = int(part["harmful"].sum())
    return beyond, f"{beyond} beyond δ ({significant} significant)"


def _most_layers_one_head(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False)
    (down, text), layers = _layers_down(part, r), int(part["layers"].sum())
    return f"{text} of {layers} layers", _three_way(down <= layers / 2, down < layers)


def _last_enc_dec(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False).set_index("kind")
    base = r["04_keep_one_translation"]["base"].iloc[0]
    worst = part.loc["enc_dec", "worst_delta"]
    most_hit = part["worst_delta"].idxmin() == "enc_dec"
    return (f"worst enc_dec layer {int(part.loc['enc_dec', 'worst_layer'])}: {worst:+.2f} BLEU of {base:.1f}",
            _three_way(-worst >= 0.25 * base, most_hit))


def _last_enc_dec_likelihood(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False).set_index("kind")
    kind = part["worst_delta"].idxmin()
    layer = int(part.loc[kind, "worst_layer"])
    last = kind == "enc_dec" and layer == int(part.loc["enc_dec", "layers"])
    return (f"worst layer: {kind} {layer} ({part.loc[kind, 'worst_delta']:+.1f} {part.loc[kind, 'unit']})",
            _three_way(last, kind == "enc_dec"))


def _bert_layers_one_head(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "nli", held_out=False)
    (down, text), layers = _layers_down(part, r), int(part["layers"].sum())
    return f"{text} of {layers} layers", _three_way(down == 0, down <= layers / 4)


def _held_out_worse(r: Results) -> tuple[str, str]:
    held, held_text = _layers_down(_keep_one(r, "translation", held_out=True), r)
    same, same_text = _layers_down(_keep_one(r, "translation", held_out=False), r)
    layers = int(_keep_one(r, "translation", held_out=True)["layers"].sum())
    return f"{held_text} of {layers} held out, {same_text} chosen on the reported set", \
        _three_way(held > same, held == same and held > 0)


def _cross_domain(r: Results) -> tuple[str, str]:
    table = r["05_cross_domain_r"]
    pooled = table[table["kind"].isin(["all", "self"])]
    strong = (pooled["pearson_r"] >= STRONG_R) & (pooled["p_value"] < 0.01)
    text = "; ".join(f"{m} r = {v:.2f}" for m, v in zip(pooled["model"], pooled["pearson_r"]))
    return text, _three_way(strong.all(), strong.any())


# ---- §4: pruning --------------------------------------------------------------------------
def _prunable(track: str) -> Callable[[Results], tuple[str, str]]:
    def check(r: Results) -> tuple[str, str]:
        table = r["06_prunable_shares"]
        share = _present(table[(table["track"] == track) & (table["order"] == "importance")],
                         f"06_prunable_shares: {track}")["prunable_share"].iloc[0]
        return f"{share:.0%}", _three_way(_within(share, paper_values.PRUNABLE_SHARE[track]), share > 0)
    return check


def _importance_beats_ablation(r: Results) -> tuple[str, str]:
    """Compared only on equal footing: an ablation order estimated on the very examples its curve
    scores (in-sample) has an advantage I_h (estimated on the training split) lacks."""
    shares = r["06_prunable_shares"]
    table = shares.pivot(index="model", columns="order", values="prunable_share")
    text = "; ".join(f"{m}: {row['importance']:.0%} vs {row['ablation']:.0%}" for m, row in table.iterrows())
    on = shares.loc[shares["order"] == "ablation", "selected_on"] if "selected_on" in shares else pd.Series([None])
    if on.isna().any() or (on == IN_SAMPLE).any():   # a table that does not say counts as in-sample
        return text + " (the ablation order in-sample or not recorded: no fair comparison)", CANNOT_TELL
    # both at 0 (the first step already costs too much) or both at 1 (nothing costs anything): no evidence
    tied_at_an_end = (table["importance"] == table["ablation"]) & table["importance"].isin([0.0, 1.0])
    wins = (table["importance"] >= table["ablation"]) & ~tied_at_an_end
    return text, _by_model(wins, tied_at_an_end)


def _importance_beats_random(r: Results) -> tuple[str, str]:
    """Against the band, not one draw: importance's prunable share must lie above the 95th
    percentile of the random orders' shares, in every model (partly: in some)."""
    shares = r["06_prunable_shares"]
    table = shares.pivot(index="model", columns="order", values="prunable_share")
    if RANDOM_HIGH not in table:
        return "(no band of random orders)", NOT_RUN
    orders = shares[shares["order"] == RANDOM_HIGH].set_index("model")["random_orders"].reindex(table.index)
    banded = orders >= MIN_BAND_ORDERS   # fewer orders make no 95th percentile: such a model is undecided
    above = (table["importance"] > table[RANDOM_HIGH]) & banded
    text = "; ".join(f"{m}: {row['importance']:.0%} vs random {row[RANDOM_LOW]:.0%} to {row[RANDOM_HIGH]:.0%} "
                     + (f"(5-95%, {int(orders[m])} orders)" if banded[m] else
                        f"({int(orders[m]) if orders.notna()[m] else 'too few'} orders: too few for a band)")
                     for m, row in table.iterrows())
    return text, _by_model(above, ~banded)


def _speedups(r: Results) -> pd.Series:
    speed = r["07_speed"].pivot(index="batch_size", columns="variant", values="median")
    return speed["pruned"] / speed["original"] - 1


def _speedup_large(r: Results) -> tuple[str, str]:
    gains = _speedups(r)
    paper, gain = paper_values.TABLE4_SPEEDUP[64], gains.iloc[-1]
    return (f"{gain:+.1%} at batch {gains.index[-1]} ({r['07_speed']['device'].iloc[0]})",
            _three_way(abs(gain - paper) <= paper / 2, gain > 0))


def _speedup_small(r: Results) -> tuple[str, str]:
    gains = _speedups(r)
    return (f"{gains.iloc[0]:+.1%} at batch {gains.index[0]}, {gains.iloc[-1]:+.1%} at {gains.index[-1]}",
            _three_way(gains.iloc[0] < gains.iloc[-1] and gains.iloc[0] < paper_values.TABLE4_SPEEDUP[64] / 2,
                       gains.iloc[0] < gains.iloc[-1]))


# ---- §5, §6, Appendix B ---------------------------------------------------------------------
def _enc_dec_most_sensitive_likelihood(r: Results) -> tuple[str, str]:
    table = r["08_pruning_by_kind_summary"].set_index("kind")["perplexity_ratio_80%"]
    text = ", ".join(f"{k} x{v:.2f}" for k, v in table.items())
    return text + " perplexity at 80% pruned", _three_way(table.idxmax() == "enc_dec", False)


def _enc_dec_most_sensitive(r: Results) -> tuple[str, str]:
    table = r["08_pruning_by_kind_summary"].set_index("kind")["relative_80%"]
    text = ", ".join(f"{k} {v:.0%}" for k, v in table.items())
    if table.isna().all():  # an unpruned BLEU of 0: no share of it to keep
        return text + " of the BLEU left at 80% pruned", NOT_REPRODUCED
    return text + " of the BLEU left at 80% pruned", _three_way(table.idxmin() == "enc_dec", False)


def _self_attention_survives(r: Results) -> tuple[str, str]:
    table = r["08_pruning_by_kind_summary"].set_index("kind")["relative_80%"].drop("enc_dec")
    paper = paper_values.FIGURE4_BLEU_AT_80["enc_self"] / paper_values.WMT_BASE_BLEU
    kept = table >= paper - SHARE_TOLERANCE
    return ", ".join(f"{k} {v:.0%}" for k, v in table.items()), _three_way(kept.all(), kept.any())


def usable_epochs(run: pd.DataFrame, min_base_share: float = MIN_BASE_SHARE) -> list[int]:
    """The epochs of one training run's chapter-09 table whose unpruned BLEU is above 0 and at
    least ``min_base_share`` of the last epoch's: those a share of the BLEU kept means something."""
    bases = run.drop_duplicates("epoch").set_index("epoch")["unpruned"].sort_index()
    return [int(e) for e, b in bases.items() if b > 0 and b >= min_base_share * bases.iloc[-1]]


def _relative_at_40(r: Results) -> pd.Series:
    """Relative BLEU with 40% pruned, by epoch, for the epochs with a usable BLEU."""
    d = r["09_importance_dynamics"]
    usable = usable_epochs(d, r.params.get("min_base_share", MIN_BASE_SHARE))
    if not usable:
        raise NoUsableBLEU("no checkpoint has a usable BLEU")
    return at_share_by_epoch(d, "relative").loc[usable]


def at_share_by_epoch(table: pd.DataFrame, column: str, share: float = 0.4) -> pd.Series:
    """``column`` of each epoch's step nearest ``share`` pruned, by epoch (chapter 09's tables)."""
    near = table.loc[table.groupby("epoch")["share"].apply(lambda s: (s - share).abs().idxmin())]
    return near.set_index("epoch")[column].sort_index()


def _early_hurts(r: Results) -> tuple[str, str]:
    try:
        rel = _relative_at_40(r)
    except NoUsableBLEU as none:
        return f"({none})", NOT_REPRODUCED
    low = paper_values.FIGURE5_KEPT_AT_40[0]
    return f"{rel.iloc[0]:.0%} left at epoch {rel.index[0]}", _three_way(rel.iloc[0] < low, rel.iloc[0] < 0.95)


def _late_survives(r: Results) -> tuple[str, str]:
    try:
        rel = _relative_at_40(r)
    except NoUsableBLEU as none:
        return f"({none})", NOT_REPRODUCED
    low = paper_values.FIGURE5_KEPT_AT_40[0]
    return f"{rel.iloc[-1]:.0%} left at epoch {rel.index[-1]}", _three_way(rel.iloc[-1] >= low, rel.iloc[-1] >= low - 0.1)


def _perplexity_at_40(r: Results) -> pd.Series:
    """The perplexity with 40% pruned relative to the unpruned checkpoint's, by epoch (likelihood)."""
    return at_share_by_epoch(r["09_importance_dynamics"], "perplexity_ratio")


def _early_hurts_likelihood(r: Results) -> tuple[str, str]:
    ratio = _perplexity_at_40(r)
    return (f"perplexity x{ratio.iloc[0]:.2f} at epoch {ratio.index[0]}, x{ratio.iloc[-1]:.2f} at {ratio.index[-1]}",
            _three_way(ratio.iloc[0] > ratio.iloc[-1] and ratio.iloc[0] > 1.10, ratio.iloc[0] > ratio.iloc[-1]))


def _late_survives_likelihood(r: Results) -> tuple[str, str]:
    ratio = _perplexity_at_40(r)
    return f"perplexity x{ratio.iloc[-1]:.2f} at epoch {ratio.index[-1]}", _three_way(ratio.iloc[-1] <= 1.10,
                                                                                       ratio.iloc[-1] <= 1.25)


def _flat_start(course_task: str) -> Callable[[Results], tuple[str, str]]:
    def check(r: Results) -> tuple[str, str]:
        table = r["10_appendix_summary"]
        row = _present(table[table["paper_task"] == _paper_task(course_task)], f"10_appendix_summary: {course_task}").iloc[0]
        return f"{row['prunable_share']:.0%} ({row['model']})", \
            _three_way(_within(row["prunable_share"], row["paper_flat_until"]), row["prunable_share"] > 0)
    return check


def _paper_task(course_task: str) -> str:
    return paper_values.FIGURE6.set_index("course_task").loc[course_task, "task"]


def _figure6_claims() -> list[Claim]:
    return [Claim(f"flat_start_{row.course_task}", "App. B", f"{row.task} ({row.metric}) can lose heads before its score drops",
                  f"flat to about {row.flat_until:.0%}", f"reproduced: prunable share within {SHARE_TOLERANCE:.0%} of "
                  "the paper's; partly: above 0", "10_appendix_more_tasks", _flat_start(row.course_task), likelihood=True)
            for row in paper_values.FIGURE6.itertuples()]


# ---- beyond the paper: what removing heads buys and breaks in a modern LM (chapter 13) ---------
BUYS_CHAPTER = "13_buys_and_breaks"
PERPLEXITY_COST = 0.10    # "at a small perplexity cost": at most 10% above the unpruned model's
COPYING_BROKEN = 0.50     # copying "breaks" below half of the unpruned model's accuracy
COPYING_DENTED = 0.90     # ... and is dented below 90% of it
COPYING_PERPLEXITY = 0.10  # "pruning that keeps perplexity": within 10% of the unpruned (chapter 11's looser tolerance)
INDUCTION_TOP = 5         # "the induction heads": the five with the highest induction score


def _kv_groups_buy_memory(r: Results) -> tuple[str, str]:
    """Read on the cache that generation left (``KV bytes, measured``), per batch size, against the
    unpruned model's at the same batch: the bytes must equal the pruned layers' prediction and
    shrink by the share of groups removed (less 5 points); then perplexity decides between
    reproduced and partly. A cache that does not shrink, or not as predicted, is not reproduced."""
    table = r["13_memory"]
    f32 = table[table["dtype"] == "float32"]
    base = _present(f32[f32["unit"] == "unpruned"], "13_memory: unpruned").set_index("batch")
    groups = _present(f32[f32["unit"] == "KV groups"], "13_memory: KV groups")
    share = groups["share"].min()
    rows = groups[groups["share"] == share].set_index("batch")
    measured = rows["KV bytes, measured"]
    saved = 1 - measured / base.loc[rows.index, "KV bytes, measured"]
    as_predicted = bool((measured == rows["KV bytes, predicted"]).all())
    cost = rows["perplexity"].iloc[0] / base["perplexity"].iloc[0] - 1
    text = (f"{share:.0%} of the KV groups: {saved.min():.0%} of the measured cache saved"
            f"{'' if saved.nunique() == 1 else f' (at least; {len(saved)} batch sizes)'}, "
            f"{'as predicted' if as_predicted else 'not the predicted bytes'}; perplexity {cost:+.0%}")
    follows = as_predicted and bool((saved >= share - 0.05).all())
    return text, REPRODUCED if follows and cost <= PERPLEXITY_COST else PARTLY if follows else NOT_REPRODUCED


def _copying_breaks(r: Results) -> tuple[str, str]:
    """Pruning by I_h on verses to the share that keeps perplexity: copying must break (under
    ``COPYING_BROKEN`` of its accuracy) and lose more than random orders of the same share do
    (below the random band's 5th percentile) for "reproduced"; a dent, or a break that random
    pruning matches, is "partly"."""
    summary = r["13_copying_summary"].set_index("order")
    row = _present(summary.loc[summary.index == "I_h on verses"], "13_copying_summary: I_h on verses").iloc[0]
    tolerance = f"{COPYING_PERPLEXITY:.0%}"
    share = row[f"prunable within {tolerance} (verses)"]
    base = row["unpruned copying accuracy"]
    if not base > 0:
        return "(the unpruned model does not copy)", NOT_REPRODUCED
    ours = row[f"copying accuracy at {tolerance}"]
    low, high = (row.get(f"random copying accuracy at {tolerance} ({q})", math.nan) for q in ("5%", "95%"))
    orders = row.get(f"random orders at {tolerance}", 0)
    banded = not pd.isna(low) and orders >= MIN_BAND_ORDERS
    band = (f"; {int(orders)} random orders of that share keep {low / base:.0%} to {high / base:.0%} (5-95%)"
            if not pd.isna(low) else "; no random band drawn")
    kept = ours / base
    text = f"{share:.0%} pruned by I_h on verses (perplexity within {tolerance}): copying keeps {kept:.0%} of its accuracy{band}"
    if pd.isna(ours) or (kept < COPYING_BROKEN and not banded):   # broken, but nothing to tell it from random pruning
        return text + ("" if banded else " (too few random orders to tell it from random pruning)"), CANNOT_TELL
    return text, _three_way(kept < COPYING_BROKEN and bool(ours < low), kept < COPYING_DENTED)


INDUCTION_ALPHA = 0.01   # the permutation test's level


def _induction_heads_underrated(r: Results) -> tuple[str, str]:
    """Do the strongest induction heads rank further down by importance than heads drawn at
    random? A permutation test on their mean rank (``significance.mean_rank_p``): one of five
    heads in the less important half happens by chance 97% of the time, so a count is no test."""
    from ...heads.significance import mean_rank_p

    ranks = r["13_induction"]
    top = ranks.nsmallest(INDUCTION_TOP, "induction rank")
    by = {"I_h on verses": "rank by I_h on verses", "their one-head effect": "rank by one-head effect on verses"}
    p = {label: mean_rank_p(top[column].astype(int), len(ranks)) for label, column in by.items() if column in top}
    text = "; ".join(f"by {label}: ranks {', '.join(str(int(x)) for x in sorted(top[by[label]]))} of {len(ranks)}, "
                     f"permutation p = {p[label]:.4f}" for label in p)
    return (f"the {INDUCTION_TOP} strongest induction heads {text}",
            _three_way(p["I_h on verses"] < INDUCTION_ALPHA,
                       p.get("their one-head effect", 1.0) < INDUCTION_ALPHA))


def _buys_and_breaks_claims() -> list[Claim]:
    return [
        Claim("kv_groups_buy_memory", "Beyond the paper, KV cache", "Removing KV groups by importance shrinks the KV "
              "cache in proportion, at a small perplexity cost", "1.67x less memory for GQA models (DuoAttention), "
              "heads chosen for it", f"reproduced: at the smallest share of KV groups removed, the cache generation leaves (measured, "
              f"at every batch size) holds the predicted bytes and shrinks by at least that share (less 5 points), "
              f"with perplexity at most {PERPLEXITY_COST:.0%} higher; partly: the cache shrinks so, perplexity rises "
              "more; not reproduced: it shrinks less, or not as predicted", BUYS_CHAPTER, _kv_groups_buy_memory,
              measured_on="KV bytes and perplexity on verses"),
        Claim("copying_breaks", "Beyond the paper, retrieval heads", "Pruning that keeps perplexity can break "
              "in-context copying", "removing the retrieval heads (under 5%) breaks retrieval; random heads do not",
              f"reproduced: at the share pruned by I_h on verses with perplexity within {COPYING_PERPLEXITY:.0%}, copying keeps under "
              f"{COPYING_BROKEN:.0%} of its accuracy and less than the 5th percentile of random orders pruning the same share; "
              f"partly: under {COPYING_DENTED:.0%}", BUYS_CHAPTER, _copying_breaks,
              measured_on="copying accuracy and perplexity on verses"),
        Claim("induction_heads_underrated", "Beyond the paper, induction heads", "Importance on ordinary "
              "text can call the heads that copy unimportant", "induction heads carry in-context copying",
              f"reproduced: the {INDUCTION_TOP} strongest induction heads rank further down by I_h on verses than "
              f"{INDUCTION_TOP} heads drawn at random (permutation test on their mean rank, p < {INDUCTION_ALPHA}); partly: "
              "only by their one-head effect", BUYS_CHAPTER, _induction_heads_underrated,
              measured_on="induction scores and importance on verses"),
    ]


CLAIMS: list[Claim] = [
    Claim("few_significant", "§3.2, Table 1", "Few heads matter alone: masking one changes the score significantly for a minority",
          f"{paper_values.SIGNIFICANT_ENC_SELF} of 96 WMT Enc-Enc heads",
          f"reproduced: under {FEW_SHARE:.0%} of the heads significant in every model; partly: in some; cannot tell: "
          f"where it holds, over {UNDERPOWERED:.0%} of the heads are placed by neither test (too little power to call "
          "few significant)",
          "03_ablating_one_head", _few_significant, likelihood=True, sample_table="03_one_head_counts"),
    Claim("most_negligible", "§3.2, Table 1", "Most heads can go alone: masking one is shown to change the score by less "
          "than a noticeable margin", "8 of 96 significant (the paper tests no equivalence)",
          f"reproduced: over {1 - FEW_SHARE:.0%} of the heads negligible (their interval within ±δ, chapter 03's "
          "margins) in every model; partly: in some; cannot tell: in none, but the undetermined heads could make it so",
          "03_ablating_one_head", _most_negligible, likelihood=True, sample_table="03_one_head_counts"),
    Claim("some_gain", "§3.2, Table 1", "Masking a head can improve the score",
          f"{paper_values.SIGNIFICANT_ENC_SELF_UP} of the {paper_values.SIGNIFICANT_ENC_SELF} significant changes are gains",
          f"reproduced: more significant gains than chance gives at alpha in that direction (binomial p < {GAIN_LEVEL}); "
          "partly: significant gains, no more than chance gives", "03_ablating_one_head", _some_gain, likelihood=True,
          sample_table="03_one_head_counts", parameters={"alpha": 0.01},
          likelihood_rule="reproduced: a gain beyond +δ (chapter 03's margins); partly: significant gains, none beyond δ"),
    Claim("most_layers_one_head", "§3.3, Table 2", "Most layers can be reduced to one head (head chosen on the reported set)",
          "5 of 18 WMT layers drop significantly", "reproduced: at most half the layers drop significantly",
          "04_keeping_one_head", _most_layers_one_head, likelihood=True, likelihood_rule=BEYOND_MARGIN_RULE,
          sample_table="04_keep_one_counts"),
    Claim("last_enc_dec", "§3.3, Table 2", "The last Enc-Dec layer is the exception: it needs its heads",
          "-13.56 BLEU of 36.05 with one head", "reproduced: the worst Enc-Dec layer loses a quarter of the BLEU; "
          "partly: it is the worst layer of all kinds", "04_keeping_one_head", _last_enc_dec,
          likelihood=_last_enc_dec_likelihood, likelihood_rule="reproduced: the worst layer of all kinds is the last "
          "Enc-Dec layer; partly: an Enc-Dec layer", sample_table="04_keep_one_counts"),
    Claim("bert_layers_one_head", "§3.3, Table 3", "No BERT layer needs more than one head", "0 of 12 layers drop significantly",
          "reproduced: no layer drops significantly; partly: at most a quarter", "04_keeping_one_head",
          _bert_layers_one_head, likelihood=True, likelihood_rule=BEYOND_MARGIN_RULE, sample_table="04_keep_one_counts"),
    Claim("held_out_worse", "App. A, Table 5", "Choosing the head on other data than the reported set costs more layers",
          "9 of 18 WMT layers (5 when chosen on the reported set)", "reproduced: more significant drops held out "
          "than chosen on the reported set; partly: as many, and some", "04_keeping_one_head", _held_out_worse, likelihood=True,
          likelihood_rule=BEYOND_MARGIN_RULE, sample_table="04_keep_one_counts"),
    Claim("cross_domain", "§3.4, Figure 2", "A head's effect in domain predicts its effect out of domain",
          f"r = {paper_values.CROSS_DOMAIN_R['translation']} (WMT), {paper_values.CROSS_DOMAIN_R['classifier']} (BERT)",
          f"reproduced: r >= {STRONG_R} with p < 0.01 for every model; partly: for one", "05_cross_domain", _cross_domain, likelihood=True,
          sample_table="05_cross_domain_r"),
    Claim("prunable_translation", "§4.2, Figure 3", "A share of the translation model's heads can be pruned with no noticeable loss",
          f"about {paper_values.PRUNABLE_SHARE['translation']:.0%} (WMT, within 1 BLEU)",
          f"reproduced: within {SHARE_TOLERANCE:.0%} of the paper's share; partly: above 0", "06_pruning_curves",
          _prunable("translation"), likelihood=True, sample_table="06_prunable_shares"),
    Claim("prunable_classifier", "§4.2, Figure 3", "A share of the classifier's heads can be pruned with no noticeable loss",
          f"about {paper_values.PRUNABLE_SHARE['classifier']:.0%} (BERT, within 1 accuracy point)",
          f"reproduced: within {SHARE_TOLERANCE:.0%} of the paper's share; partly: above 0", "06_pruning_curves",
          _prunable("classifier"), likelihood=True, sample_table="06_prunable_shares"),
    Claim("importance_beats_ablation", "§4.2, Figure 3", "Ranking by importance prunes at least as well as ranking by one-head ablation",
          "importance above the ablation curve", "reproduced: importance's prunable share >= ablation's for every "
          "model, both orders estimated on data the curves do not score (else cannot tell); partly: for some",
          "06_pruning_curves", _importance_beats_ablation, likelihood=True,
          sample_table="06_prunable_shares"),
    Claim("importance_beats_random", "§4.2, Figure 3", "Ranking by importance prunes more than pruning at random",
          "no random baseline in Figure 3 (Budhraja et al. 2020 find random pruning comes close)",
          "reproduced: importance's prunable share above the 95th percentile of the random orders' shares for every "
          "model; partly: for some; cannot tell: a model's band has too few orders (under 19)", "06_pruning_curves",
          _importance_beats_random, likelihood=True,
          sample_table="06_prunable_shares"),
    Claim("speedup_large", "§4.3, Table 4", "Removing half the heads speeds inference up at large batches",
          f"{paper_values.TABLE4_SPEEDUP[64]:+.1%} at batch 64 (GTX 1080Ti)",
          "reproduced: within half of the paper's gain either way; partly: faster", "07_pruning_speed",
          _speedup_large, sample_table="07_speed"),
    Claim("speedup_small", "§4.3, Table 4", "At batch size 1 there is almost no gain",
          f"{paper_values.TABLE4_SPEEDUP[1]:+.1%} at batch 1", "reproduced: batch 1 gains less than the largest "
          "batch and under half the paper's large-batch gain; partly: less than the largest batch",
          "07_pruning_speed", _speedup_small, sample_table="07_speed"),
    Claim("enc_dec_most_sensitive", "§5, Figure 4", "Enc-Dec attention depends on its heads most", "Enc-Dec collapses past 60% pruned",
          "reproduced: Enc-Dec keeps the smallest share of its BLEU at 80% of its heads pruned",
          "08_attention_kinds", _enc_dec_most_sensitive, likelihood=_enc_dec_most_sensitive_likelihood,
          likelihood_rule="reproduced: Enc-Dec's perplexity rises the most at 80% of its heads pruned"),
    Claim("self_attention_survives", "§5, Figure 4", "Self-attention survives losing most of its heads",
          f"about {paper_values.FIGURE4_BLEU_AT_80['enc_self']:.0f} of {paper_values.WMT_BASE_BLEU} BLEU at 80% pruned",
          f"reproduced: both self-attention kinds keep at least the paper's share less {SHARE_TOLERANCE:.0%}; "
          "partly: one", "08_attention_kinds", _self_attention_survives),
    Claim("early_hurts", "§6, Figure 5", "Early in training, pruning 40% of the heads hurts",
          "well under 85% of the BLEU left in epochs 1-2", "reproduced: under 85% left at the first epoch with a "
          "usable BLEU (at least min_base_share of the last epoch's); partly: under 95%", "09_training_dynamics",
          _early_hurts, likelihood=_early_hurts_likelihood, parameters={"min_base_share": MIN_BASE_SHARE},
          likelihood_rule="reproduced: 40% pruned raises the perplexity more at the first epoch than at the last, and by "
          "over 10%; partly: more at the first"),
    Claim("late_survives", "§6, Figure 5", "Later, 40% of the heads can go at little cost (unimportant heads emerge)",
          "85 to 90% of the BLEU left from about epoch 10", "reproduced: at least 85% left at the last epoch; "
          "partly: at least 75%", "09_training_dynamics", _late_survives, likelihood=_late_survives_likelihood,
          parameters={"min_base_share": MIN_BASE_SHARE},
          likelihood_rule="reproduced: at the last epoch, 40% pruned raises the perplexity by at most 10%; partly: 25%"),
    *_figure6_claims(),
    Claim("few_significant_every_removal", "§3.2, Table 1", "Few heads matter alone, whether a head is zeroed, replaced "
          "by its mean or by its output on another example", "masking (zero) only",
          f"reproduced: chapter 03's rule (under {FEW_SHARE:.0%} significant in every model) holds under every way of "
          "removing a head; partly: under some", REMOVAL_CHAPTER, _every_removal(_few_significant), likelihood=True,
          sample_table="12_removal_counts"),
    Claim("most_negligible_every_removal", "§3.2, Table 1", "Most heads are shown negligible alone, whichever way a head "
          "is removed", "8 of 96 significant, masking only (the paper tests no equivalence)",
          f"reproduced: chapter 03's rule (over {1 - FEW_SHARE:.0%} negligible in every model) holds under every way of "
          "removing a head; partly: under some", REMOVAL_CHAPTER, _every_removal(_most_negligible), likelihood=True,
          sample_table="12_removal_counts"),
    *_buys_and_breaks_claims(),
]


CLAIMS_BY_KEY = {c.key: c for c in CLAIMS}


# ---- judging ----------------------------------------------------------------------------------
def _folder(profile: str, results_root: Path | None) -> Path:
    return Path(results_root or default_results_root()) / profile


def _parameters_file(folder: Path, chapter: str) -> Path:
    return folder / "parameters" / f"{chapter}.json"


def record_parameters(profile: str, chapter: str, params: dict[str, Any], results_root: Path | None = None) -> None:
    """Keep the rule parameters ``chapter`` ran with, for the scorecard to judge its claims alike;
    a parameter that no claim of the chapter reads is refused (a typo would change nothing)."""
    known = {name for c in CLAIMS if c.chapter == chapter for name in c.parameters}
    unknown = set(params) - known
    if unknown:
        raise ValueError(f"no claim of chapter {chapter} reads the parameter(s) {sorted(unknown)}; "
                         f"its claims read {sorted(known) or 'none'}")
    path = _parameters_file(_folder(profile, results_root), chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(params, sort_keys=True))


def claim_parameters(claim: Claim, folder: Path) -> dict[str, Any]:
    """The claim's rule parameters: the values its chapter last recorded, else the defaults."""
    path = _parameters_file(folder, claim.chapter)
    recorded = json.loads(path.read_text()) if path.exists() else {}
    return {name: recorded.get(name, default) for name, default in claim.parameters.items()}


def judge(claim: Claim, folder: Path, measure: str = "") -> list[dict[str, Any]]:
    """The claim's verdicts on one measure (a ``MEASURES`` key): one row per training seed
    checked (``training_seed`` None where the tables have no seeds), then the combined row
    (``training_seed`` "all"). Each row: key, measure, training_seed, ours, verdict, rule."""
    base = {"key": claim.key, "measure": MEASURES[measure]}
    if measure and not claim.likelihood:
        return [{**base, "training_seed": "all", "ours": "", "verdict": NOT_MEASURED, "rule": ""}]
    check = claim.check if not measure or claim.likelihood is True else claim.likelihood
    rule = claim.rule if not measure else claim.likelihood_rule
    results = Results(folder, measure=measure, params=claim_parameters(claim, folder))
    try:
        found = _per_seed(claim, check, results)
    except MissingResults as missing:
        return [{**base, "training_seed": "all", "verdict": NOT_RUN, "rule": rule,
                 "ours": f"({missing.args[0]}{measure}.csv not found: run {claim.chapter})"}]
    except KeyError as missing:  # a table written by an older version of the chapter
        return [{**base, "training_seed": "all", "verdict": NOT_RUN, "rule": rule,
                 "ours": f"(no {missing.args[0]!r} in the results: rerun {claim.chapter})"}]
    rows = [{**base, "training_seed": seed, "ours": text, "verdict": verdict, "rule": rule}
            for seed, (text, verdict) in found.items()]
    texts = {text for text, _ in found.values()}
    verdicts = {verdict for _, verdict in found.values()}
    combined = next(iter(texts)) if len(texts) == 1 else "; ".join(f"seed {s}: {t}" for s, (t, _) in found.items())
    rows.append({**base, "training_seed": "all", "ours": combined, "rule": rule,
                 "verdict": next(iter(verdicts)) if len(verdicts) == 1 else DEPENDS_ON_SEED,
                 "seeds": ", ".join(str(s) for s in found if s is not None)})
    return rows


def _per_seed(claim: Claim, check, results: Results) -> dict[int | None, tuple[str, str]]:
    """``{training seed: (ours, verdict)}``: ``check`` on each seed's rows (``{None: ...}`` where
    the tables have no seeds)."""
    seeds = results.training_seeds()
    if not seeds:
        try:
            return {None: check(results)}
        except SeedNotRun as missing:
            raise MissingResults(missing.args[0]) from None
    found: dict[int | None, tuple[str, str]] = {}
    for seed in seeds:
        try:
            found[seed] = check(results.for_seed(seed))
        except SeedNotRun:
            continue
    if not found:
        raise MissingResults(f"{claim.chapter} (no training seed)")
    return found


def chapter_verdicts(profile: str, chapter: str, results_root: Path | None = None, **params: Any) -> pd.DataFrame:
    """The verdicts on the claims of ``chapter`` that the scorecard gives, one row per claim,
    measure and training seed, and a combined row per claim and measure (``training_seed``
    "all"). ``params``: the rule parameters the chapter ran with (recorded for the scorecard).
    Columns: key, claim, measure, training_seed, ours, verdict, rule, profile."""
    if params:
        record_parameters(profile, chapter, params, results_root)
    folder = _folder(profile, results_root)
    rows = [{"claim": c.claim, **row} for c in CLAIMS if c.chapter == chapter
            for measure in MEASURES for row in judge(c, folder, measure)]
    if not rows:
        raise ValueError(f"no claim of the paper is judged in chapter {chapter!r}; chapters with claims: "
                         f"{sorted({c.chapter for c in CLAIMS})}")
    table = pd.DataFrame(rows).assign(profile=profile)
    return table[["key", "claim", "measure", "training_seed", "ours", "verdict", "rule", "profile"]]


def verdict_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """``chapter_verdicts`` laid out to read: one row per claim and measure, a column per training
    seed with that seed's verdict, and the combined verdict."""
    measured = verdicts[verdicts["verdict"] != NOT_MEASURED]
    seeded = measured[measured["training_seed"] != "all"]
    combined = measured[measured["training_seed"] == "all"]
    table = combined.set_index(["claim", "measure"])[["ours", "verdict"]]
    if not seeded.empty and seeded["training_seed"].notna().any():
        per_seed = seeded.pivot_table(index=["claim", "measure"], columns="training_seed", values="verdict",
                                      aggfunc="first", sort=False)
        per_seed.columns = [f"seed {int(s)}" for s in per_seed.columns]
        table = per_seed.join(table)
    table = table.reindex(combined.set_index(["claim", "measure"]).index)
    shown = [shown_measure(key, name) for key, name in combined[["key", "measure"]].itertuples(index=False)]
    table = table.set_axis(pd.MultiIndex.from_arrays([table.index.get_level_values("claim"), shown],
                                                     names=["claim", "measure"]))
    if "profile" in verdicts:   # the verdicts are those of one profile's run: its name heads the table
        table.columns.name = f"{verdicts['profile'].iloc[0]} profile"
    return table


def shown_measure(key: str, measure: str) -> str:
    """How a verdict line names ``measure`` for claim ``key``: a claim beyond the paper is judged
    on what its check reads (``Claim.measured_on``), not on "the paper's metric"."""
    claim = next((c for c in CLAIMS if c.key == key), None)
    return claim.measured_on if measure == METRIC and claim is not None and claim.measured_on else measure


def verdict_of(verdicts: pd.DataFrame, key: str, measure: str = METRIC) -> str:
    """The combined verdict of claim ``key`` on ``measure`` (its one name) in ``chapter_verdicts``."""
    row = verdicts[(verdicts["key"] == key) & (verdicts["measure"] == measure) & (verdicts["training_seed"] == "all")]
    if row.empty:
        raise KeyError(f"no verdict on claim {key!r} for {measure!r}")
    return str(row["verdict"].iloc[0])


def verdict_sentences(verdicts: pd.DataFrame, measure: str | None = None) -> str:
    """The registry's verdicts as Markdown for a chapter's text: per claim (and measure), the
    combined verdict, and each seed's where they differ."""
    lines = []
    for (key, name), part in verdicts.groupby(["key", "measure"], sort=False):
        if measure is not None and name != measure:
            continue
        combined = part[part["training_seed"] == "all"].iloc[0]
        if combined["verdict"] == NOT_MEASURED:
            continue
        seeds = part[(part["training_seed"] != "all") & part["training_seed"].notna()]
        detail = ("" if seeds["verdict"].nunique() <= 1 else
                  " (" + "; ".join(f"seed {int(s)}: {v}" for s, v in zip(seeds["training_seed"], seeds["verdict"])) + ")")
        lines.append(f"*{combined['claim']}*, on {shown_measure(key, name)}: **{combined['verdict']}**{detail}.")
    return " ".join(lines)


def _correlation_sample_text(table: pd.DataFrame, level: float = 0.01) -> str:
    """What a correlation claim rests on, per model: the heads correlated and the smallest |r| a
    two-sided test at ``level`` calls significant with that many (t with n - 2 degrees of freedom)."""
    from scipy.stats import t

    parts = []
    for name, part in table.groupby("model", sort=False):
        n = int(part["heads"].max())   # the row of all kinds together, or a model's only kind
        critical = t.ppf(1 - level / 2, n - 2)
        parts.append(f"{name}: n = {n} heads, |r| >= {critical / math.sqrt(n - 2 + critical ** 2):.2f} detectable "
                     f"at p < {level}")
    return "; ".join(parts)


def _curve_sample_text(table: pd.DataFrame) -> str:
    """What a pruning-curve claim rests on, per model: the examples each step is scored on, the
    step (the prunable share is read to that resolution) and the random orders of the band."""
    parts = []
    for name, part in table.groupby("model", sort=False):
        band = part.loc[part["order"] == RANDOM_HIGH, "random_orders"] if "random_orders" in part else pd.Series(dtype=float)
        parts.append(f"{name}: n = {int(part['examples'].max()):,}, shares in steps of {part['step'].max():.0%}"
                     + (f", {int(band.max())} random orders" if band.notna().any() else ""))
    return "; ".join(parts)


def sample_text(claim: Claim, folder: Path, measure: str = "") -> str:
    """What the claim's one-head tests rest on, per model: the examples and the resolution (the
    change a head must make to be called significant half of the time, ``head_effects.resolution``),
    e.g. ``"translation: n = 400, ±0.004 nats"``; "" where the claim names no ``sample_table`` or
    its table has no such columns (a run from before they were recorded)."""
    path = folder / f"{claim.sample_table}{measure}.csv"
    if not claim.sample_table or not path.exists():
        return ""
    table = ours(pd.read_csv(path))
    if {"examples", "step", "order"} <= set(table.columns):
        return _curve_sample_text(table)
    if {"heads", "pearson_r", "kind"} <= set(table.columns):
        return _correlation_sample_text(table)
    if {"median", "iqr", "runs"} <= set(table.columns):
        noise = (table["iqr"] / table["median"]).max()
        runs = table["runs"].map(lambda r: len(json.loads(r)) if isinstance(r, str) else 0).min()
        return f"{runs} timed passes per variant and batch; timing noise up to {noise:.1%} (IQR / median)"
    if not {"examples", "resolution", "unit"} <= set(table.columns) or table["examples"].isna().all():
        return ""
    model = next(c for c in IDENTITY_COLUMNS if c in table)
    parts = []
    for name, part in table.groupby(model, sort=False):
        unit = " or ".join(dict.fromkeys(part["unit"].astype(str)))
        parts.append(f"{str(name).removeprefix('model ')}: n = {int(part['examples'].max()):,}, "
                     f"±{part['resolution'].median():.2g} {unit}")
    return "; ".join(parts)


def scorecard(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """One row per claim: section, claim, paper, ours, verdict, likelihood, likelihood verdict,
    seeds, rule, likelihood rule, chapter, profile, and the samples the one-head verdicts rest on
    (``sample``, ``likelihood sample``: ``sample_text``); read from ``results_root/<profile>``
    (default: where the chapters write, ``results.results_root()``)."""
    folder = _folder(profile, results_root)
    rows = []
    for c in CLAIMS:
        metric = judge(c, folder, "")[-1]
        likely = judge(c, folder, LIKELIHOOD)[-1]
        rows.append({"section": c.section, "claim": c.claim, "paper": c.paper, "ours": metric["ours"],
                     "verdict": metric["verdict"], "likelihood": likely["ours"],
                     "likelihood verdict": likely["verdict"], "seeds": metric.get("seeds", ""), "rule": c.rule,
                     "likelihood rule": likely["rule"], "chapter": c.chapter, "profile": profile,
                     "sample": sample_text(c, folder) if metric["verdict"] != NOT_RUN else "",
                     "likelihood sample": sample_text(c, folder, LIKELIHOOD)
                     if likely["verdict"] not in (NOT_RUN, NOT_MEASURED) else ""})
    return pd.DataFrame(rows)


def disagreements(card: pd.DataFrame) -> pd.DataFrame:
    """The claims whose verdict on the paper's metric differs from their likelihood verdict
    (claims measured on both)."""
    both = card[~card["likelihood verdict"].isin([NOT_MEASURED, NOT_RUN]) & (card["verdict"] != NOT_RUN)]
    return both[both["verdict"] != both["likelihood verdict"]]


def verdict_counts(card: pd.DataFrame, column: str = "verdict") -> dict[str, int]:
    """How many claims have each verdict in ``column`` (``verdict`` or ``likelihood verdict``)."""
    counts = card[column].value_counts()
    return {v: int(counts.get(v, 0)) for v in (*VERDICTS, NOT_MEASURED) if column != "verdict" or v != NOT_MEASURED}
