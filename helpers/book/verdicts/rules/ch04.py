"""Chapter 04's claims (§3.3, Tables 2, 3 and 5): most layers can be cut to one head, except the
last Enc-Dec layer; no BERT layer needs more; choosing the head on other data costs more. The
rules read ``04_keep_one_counts``, and the per-layer rows of ``04_keep_one_translation`` where a
claim pairs layers or reads one layer (``keep_one.per_layer``)."""

from __future__ import annotations

from statistics import NormalDist

import pandas as pd

from ...experiments import keep_one
from .. import samples
from ..between_seeds import Share, Value
from ..engine import (
    CANNOT_TELL,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Results,
    ours,
    present,
    three_way,
)
from ..pooling import mean_over_seeds, over_counts, supported

CHAPTER = "04_keeping_one_head"
COUNTS = "04_keep_one_counts"
TRANSLATION = "04_keep_one_translation"
HELD_OUT_LEVEL = 0.05  # "more layers down held out": McNemar's one-sided exact p below this
QUARTER = 0.25  # "the last Enc-Dec layer needs its heads": it loses at least this share of the BLEU
BEYOND_MARGIN_RULE = (
    "the same rule, counting the layers whose change lies wholly below -δ (chapter 04's margins) "
    "instead of the significant drops, and as undecided those whose interval straddles a margin"
)
UNDECIDED = (
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
    """The translation model's per-layer rows under a protocol (``keep_one.per_layer``), every seed
    of ``r``, with each layer's change relative to its seed's unpruned score (``relative``) and
    that change's standard error read off its bootstrap interval (``relative_se``: the alpha and 1 -
    alpha quantiles, so the width over 2 z(1 - alpha))."""
    part = _keep_one(r, "translation", held_out=held_out)
    protocol, margin = part["protocol"].iloc[0], float(part["margin"].iloc[0]) if "margin" in part else 0.0
    rows = keep_one.per_layer(r[TRANSLATION], protocol, bool(r.measure), margin)
    alpha = r.params.get("alpha", 0.01)
    looked = rows["look"].notna() if "look" in rows else pd.Series(False, index=rows.index)
    z = looked.map(
        {True: NormalDist().inv_cdf(1 - alpha / 2), False: NormalDist().inv_cdf(1 - alpha)}
    )  # a look: alpha/2
    se = (rows["delta_high"] - rows["delta_low"]) / (2 * z)
    scale = rows["base"].where(rows["base"] != 0) if not r.measure else 1.0
    return rows.assign(relative=rows["delta"] / scale, relative_se=se / scale)


def _pooled_layers(rows: pd.DataFrame) -> dict[tuple[str, int], object]:
    """Per (kind, layer): its relative change pooled over the seeds (``pooling.mean_over_seeds``)."""
    return {
        (kind, int(layer)): mean_over_seeds(part["relative"], part["relative_se"])
        for (kind, layer), part in rows.groupby(["kind", "layer"], sort=False)
    }


def could_be_worst(pooled: dict) -> list:
    """The layers whose interval reaches below the highest end of every other's: any of them may
    truly be the worst (near-ties are not broken by point estimates)."""
    ceiling = min(p.high for p in pooled.values())
    return [layer for layer, p in pooled.items() if p.low <= ceiling]


def last_enc_dec(r: Results) -> tuple[str, str]:
    """The claim names the last Enc-Dec layer: it must be the worst Enc-Dec layer (the only one
    whose interval could be the worst: ``could_be_worst``) and lose a quarter of the BLEU itself
    (its own interval wholly below -``QUARTER``); partly: one of the two. Read over every state
    the intervals allow (``supported``): a near-tie for the worst, or an interval across a quarter,
    leaves both possibilities open."""
    rows = _layers(r)
    if rows["relative"].isna().any():  # an unpruned BLEU of 0: no share of it to lose
        return "(the unpruned BLEU is 0: no share of it to lose)", CANNOT_TELL
    enc_dec = rows[rows["kind"] == "enc_dec"]
    pooled = _pooled_layers(enc_dec)
    last = max(pooled)
    candidates = could_be_worst(pooled)
    own = pooled[last]
    worst = {c == last for c in candidates}
    quarter = {v for v, holds in ((True, own.low <= -QUARTER), (False, own.high > -QUARTER)) if holds}
    verdict = supported(three_way(w and q, w or q) for w in worst for q in quarter)
    others = [layer + 1 for kind, layer in candidates if (kind, layer) != last]
    text = (
        f"last Enc-Dec layer ({last[1] + 1}): {own.x:+.0%} [{own.low:+.0%}, {own.high:+.0%}] of the BLEU"
        + (f"; layer{'s' * (len(others) > 1)} {', '.join(map(str, others))} could be worse" if others else "")
        + _of_seeds(r)
    )
    return text, verdict


def last_enc_dec_likelihood(r: Results) -> tuple[str, str]:
    """On the likelihood: the worst layer of all kinds must be the last Enc-Dec layer; partly: an
    Enc-Dec layer; read over every layer that could be the worst (``could_be_worst``)."""
    pooled = _pooled_layers(_layers(r))
    last = ("enc_dec", max(layer for kind, layer in pooled if kind == "enc_dec"))
    candidates = could_be_worst(pooled)
    verdict = supported(three_way(c == last, c[0] == "enc_dec") for c in candidates)
    shown = ", ".join(f"{k} {layer + 1} ({pooled[(k, layer)].x * 1000:+.1f} millinats)" for k, layer in candidates)
    return f"the worst layer could be: {shown}{_of_seeds(r)}", verdict


# ---- held out against the reported set ------------------------------------------------------------
def held_out_worse(r: Results) -> tuple[str, str]:
    """More layers down held out than chosen on the reported set. The layers are paired (the same
    layer of the same model under two protocols), so the test is McNemar's on the discordant
    layers: one-sided exact p < ``HELD_OUT_LEVEL`` for "reproduced". "Not reproduced" needs the
    data to exclude the paper's effect: the upper 95% bound on the share of layers held out costs
    beyond the reported set (``excess_bound``) below the paper's (Table 5's layers down less
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
        states[name] = (b, c, mcnemar_p(b, c), excess_bound(b, c, layers))
    verdicts = {
        REPRODUCED if p < HELD_OUT_LEVEL else NOT_REPRODUCED if bound < effect else CANNOT_TELL
        for b, c, p, bound in states.values()
    }
    b, c, p, bound = states["as seen"]
    text = (
        f"{int(pairs['down_held'].sum())} of {layers} layers down held out, {int(pairs['down_same'].sum())} chosen on "
        f"the reported set; {b} down only held out, {c} only on the reported set (McNemar one-sided p = {p:.2g}; "
        f"at most {bound:.0%} more layers down held out, 95% bound; the paper: {effect:.0%}){_of_seeds(r)}"
    )
    return text, supported(verdicts)


def mcnemar_p(b: int, c: int) -> float:
    """McNemar's exact one-sided p that ``b`` (layers down only held out) exceeds ``c`` (down only
    on the reported set) by more than chance: P(Binomial(b + c, 1/2) >= b); 1 with no discordant layer."""
    from scipy.stats import binom

    return float(binom.sf(b - 1, b + c, 0.5)) if b + c else 1.0


def excess_bound(b: int, c: int, layers: int, level: float = 0.05) -> float:
    """A one-sided upper ``1 - level`` bound on the share of layers that held out costs beyond the
    reported set: the Clopper-Pearson bound on ``b`` (layers down only held out) of ``layers``.
    The excess is b - c over the layers, at most b's share, so the bound holds whatever ``c`` is
    and however many layers happen to be discordant."""
    from scipy.stats import beta

    return 1.0 if b >= layers else float(beta.ppf(1 - level, b + 1, layers - b))


def _paper_effect(r: Results) -> float:
    """The paper's share of layers that held out costs beyond the reported set: its Table 5's
    layers down less its Table 2's, over Table 2's layers (``keep_one.paper_counts``; the paper
    measured no likelihood, so both measures read it)."""
    paper = keep_one.paper_counts()
    wmt = paper[paper["source"] == "WMT"]
    down = wmt.groupby("protocol")["significant_down"].sum()
    return float(down["Table 5"] - down["Table 2"]) / int(wmt.loc[wmt["protocol"] == "Table 2", "layers"].sum())


# ---- between seeds --------------------------------------------------------------------------------
def layers_down_statistic(track: str, held_out: bool = False):
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


def last_layer_statistic(r: Results) -> dict[str, Value]:
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
        "5 of 18 WMT layers drop significantly",
        "reproduced: at most half the layers drop significantly; not reproduced: more than half" + UNDECIDED,
        CHAPTER,
        most_layers_one_head,
        likelihood=True,
        likelihood_rule=BEYOND_MARGIN_RULE,
        sample=counts_sample,
        seed_statistic=layers_down_statistic("translation"),
    ),
    Claim(
        "last_enc_dec",
        "§3.3, Table 2",
        "The last Enc-Dec layer is the exception: it needs its heads",
        "-13.56 BLEU of 36.05 with one head",
        f"reproduced: the last Enc-Dec layer is the worst of its kind (no other's interval reaches its) and itself "
        f"loses at least {QUARTER:.0%} of the BLEU (its whole interval); partly: one of the two; read over every "
        "state the intervals leave open",
        CHAPTER,
        last_enc_dec,
        likelihood=last_enc_dec_likelihood,
        likelihood_rule="reproduced: the worst layer of all kinds is the last Enc-Dec layer; partly: an Enc-Dec "
        "layer; read over every layer whose interval could make it the worst",
        parameters={"alpha": 0.01},
        sample=counts_sample,
        seed_statistic=last_layer_statistic,
    ),
    Claim(
        "bert_layers_one_head",
        "§3.3, Table 3",
        "No BERT layer needs more than one head",
        "0 of 12 layers drop significantly",
        "reproduced: no layer drops significantly; partly: at most a quarter" + UNDECIDED,
        CHAPTER,
        bert_layers_one_head,
        likelihood=True,
        likelihood_rule=BEYOND_MARGIN_RULE,
        sample=counts_sample,
        seed_statistic=layers_down_statistic("nli"),
    ),
    Claim(
        "held_out_worse",
        "App. A, Table 5",
        "Choosing the head on other data than the reported set costs more layers",
        "9 of 18 WMT layers (5 when chosen on the reported set)",
        "reproduced: more layers drop held out than chosen on the reported set, by McNemar's one-sided exact test "
        f"on the paired layers (p < {HELD_OUT_LEVEL}); not reproduced: the 95% upper bound on the extra share of "
        "layers down held out is below the paper's (Table 5's layers down less Table 2's); cannot tell: neither; "
        "read over every way the undecided layers could fall",
        CHAPTER,
        held_out_worse,
        likelihood=True,
        likelihood_rule=BEYOND_MARGIN_RULE,
        parameters={"alpha": 0.01},
        sample=counts_sample,
        seed_statistic=layers_down_statistic("translation", held_out=True),
    ),
]
