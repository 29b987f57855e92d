"""Chapter 04's claims (§3.3, Tables 2, 3 and 5): most layers can be cut to one head, except the
last Enc-Dec layer; no BERT layer needs more; choosing the head on other data costs more. The
rules read ``04_keep_one_counts``."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from .. import samples
from ..between_seeds import Share, Value
from ..engine import CANNOT_TELL, NOT_REPRODUCED, REPRODUCED, Claim, Results, ours, present, three_way

CHAPTER = "04_keeping_one_head"
COUNTS = "04_keep_one_counts"
HELD_OUT_LEVEL = 0.05  # "more layers down held out" needs a one-sided Fisher p below this
BEYOND_MARGIN_RULE = (
    "the same rule, counting the layers whose change lies wholly below -δ (chapter 04's margins) "
    "instead of the significant drops, and as undecided those whose interval straddles a margin"
)
UNDECIDED = (
    "; cannot tell: where the layers neither test places (not significant, not shown within ±δ) could "
    "change the verdict"
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
    (``undetermined``). A table from before these were counted has none undecided."""
    significant = int(part["significant_down"].sum())
    column = "undetermined" if r.measure else "unplaced"
    undecided = int(part[column].sum()) if column in part else 0
    beside = f", {undecided} undecided" if undecided else ""
    if not r.measure:
        return significant, undecided, f"{significant}{beside}"
    beyond = int(part["harmful"].sum())
    return beyond, undecided, f"{beyond} beyond δ ({significant} significant{beside})"


def either_way(rule: Callable[[int], str], down: int, undecided: int) -> str:
    """``rule`` (layers down -> verdict) when every undecided layer is up and when every one is
    down: their verdict where the two agree, else ``cannot tell`` (the undecided could change it)."""
    best, worst = rule(down), rule(down + undecided)
    return best if best == worst else CANNOT_TELL


def most_layers_one_head(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False)
    down, undecided, text = _layers_down(part, r)
    layers = int(part["layers"].sum())
    # "most layers": refuted as soon as more than half drop, not only when every layer does
    most = lambda d: REPRODUCED if d <= layers / 2 else NOT_REPRODUCED
    return f"{text} of {layers} layers", either_way(most, down, undecided)


def last_enc_dec(r: Results) -> tuple[str, str]:
    """The claim names the last Enc-Dec layer: the worst Enc-Dec layer must be the last one and
    lose a quarter of the BLEU; partly: one of the two, or the Enc-Dec kind is the most hit."""
    part = _keep_one(r, "translation", held_out=False).set_index("kind")
    base = r["04_keep_one_translation"]["base"].iloc[0]
    worst = part.loc["enc_dec", "worst_delta"]
    layer = int(part.loc["enc_dec", "worst_layer"])
    last = layer == int(part.loc["enc_dec", "layers"])
    large = -worst >= 0.25 * base
    most_hit = part["worst_delta"].idxmin() == "enc_dec"
    return (
        f"worst enc_dec layer {layer}{' (the last)' if last else ''}: {worst:+.2f} BLEU of {base:.1f}",
        three_way(large and last, large or most_hit),
    )


def last_enc_dec_likelihood(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False).set_index("kind")
    kind = part["worst_delta"].idxmin()
    layer = int(part.loc[kind, "worst_layer"])
    last = kind == "enc_dec" and layer == int(part.loc["enc_dec", "layers"])
    return (
        f"worst layer: {kind} {layer} ({part.loc[kind, 'worst_delta']:+.1f} {part.loc[kind, 'unit']})",
        three_way(last, kind == "enc_dec"),
    )


def bert_layers_one_head(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "nli", held_out=False)
    down, undecided, text = _layers_down(part, r)
    layers = int(part["layers"].sum())
    return f"{text} of {layers} layers", either_way(lambda d: three_way(d == 0, d <= layers / 4), down, undecided)


def held_out_worse(r: Results) -> tuple[str, str]:
    """More layers down held out than chosen on the reported set, by a one-sided Fisher exact test
    on the two counts of layers (``HELD_OUT_LEVEL``): the layers are the units, so with 18 layers
    only a large difference is a finding. The test treats the two protocols' layers as
    independent samples; they are the same layers, so it errs on the side of "cannot tell".
    Undecided layers are counted down held out and up chosen on the reported set (and the
    reverse): a verdict they could change is ``cannot tell``."""
    held_part = _keep_one(r, "translation", held_out=True)
    held, held_undecided, held_text = _layers_down(held_part, r)
    same, same_undecided, same_text = _layers_down(_keep_one(r, "translation", held_out=False), r)
    layers = int(held_part["layers"].sum())

    def verdict(h: int, s: int) -> str:
        if h <= s:
            return NOT_REPRODUCED
        return REPRODUCED if more_down_p(h, s, layers) < HELD_OUT_LEVEL else CANNOT_TELL

    best, worst = verdict(held + held_undecided, same), verdict(held, same + same_undecided)
    p = more_down_p(held, same, layers)
    return (
        f"{held_text} of {layers} held out, {same_text} chosen on the reported set (one-sided Fisher p = {p:.2g})",
        best if best == worst else CANNOT_TELL,
    )


def more_down_p(held: int, same: int, layers: int) -> float:
    """One-sided Fisher exact p that ``held`` of ``layers`` down is a larger share than ``same`` of
    ``layers``."""
    from scipy.stats import fisher_exact

    return float(fisher_exact([[held, layers - held], [same, layers - same]], alternative="greater").pvalue)


def layers_down_statistic(track: str, held_out: bool = False):
    """A claim's statistic for the between-seed test: the layers down (as ``_layers_down`` counts
    them on the measure) of ``track``'s table chosen on the reported set, and held out too."""

    def statistic(r: Results) -> dict[str, Share]:
        out = {}
        for protocol in (False, True) if held_out else (False,):
            part = _keep_one(r, track, held_out=protocol)
            out[f"{track}, {'held out' if protocol else 'chosen on the reported set'}"] = Share(
                _layers_down(part, r)[0], int(part["layers"].sum())
            )
        return out

    return statistic


def worst_enc_dec_statistic(r: Results) -> dict[str, Value]:
    """``last_enc_dec``'s statistic: the worst Enc-Dec layer's change, with the standard error its
    tests' resolution implies (the interval's half-width at alpha, one side: z of 1 - alpha)."""
    from statistics import NormalDist

    row = _keep_one(r, "translation", held_out=False).set_index("kind").loc["enc_dec"]
    z = NormalDist().inv_cdf(1 - r.params.get("alpha", 0.01))
    return {"worst enc_dec layer": Value(float(row["worst_delta"]), float(row["resolution"]) / z)}


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
        "reproduced: the worst Enc-Dec layer is the last one and loses a "
        "quarter of the BLEU; partly: it loses a quarter but is not the last, or Enc-Dec is the most hit kind",
        CHAPTER,
        last_enc_dec,
        likelihood=last_enc_dec_likelihood,
        likelihood_rule="reproduced: the worst layer of all kinds is the last Enc-Dec layer; partly: an Enc-Dec layer",
        sample=counts_sample,
        seed_statistic=worst_enc_dec_statistic,
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
        f"reproduced: more layers drop significantly "
        "held out than chosen on the reported set, by a one-sided Fisher exact test on the layers (p < "
        f"{HELD_OUT_LEVEL}); "
        "cannot tell: more, but not significantly so, or undecided layers could change it; not reproduced: no more",
        CHAPTER,
        held_out_worse,
        likelihood=True,
        likelihood_rule=BEYOND_MARGIN_RULE,
        sample=counts_sample,
        seed_statistic=layers_down_statistic("translation", held_out=True),
    ),
]
