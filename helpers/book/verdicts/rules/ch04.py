"""Chapter 04's claims (§3.3, Tables 2, 3 and 5): most layers can be cut to one head, except the
last Enc-Dec layer; no BERT layer needs more; choosing the head on other data costs more. The
rules read ``04_keep_one_counts``."""
from __future__ import annotations

import pandas as pd

from .. import samples
from ..engine import Claim, Results, ours, present, three_way

CHAPTER = "04_keeping_one_head"
COUNTS = "04_keep_one_counts"
BEYOND_MARGIN_RULE = ("the same rule, counting the layers whose change lies wholly below -δ (chapter 04's margins) "
                      "instead of the significant drops")


def _keep_one(r: Results, track: str, held_out: bool) -> pd.DataFrame:
    counts = ours(r[COUNTS])
    counts = counts[counts["source"].str.endswith(track)]
    chosen_on_reported = counts["protocol"].str.startswith("chosen and reported")
    return present(counts[~chosen_on_reported if held_out else chosen_on_reported], f"{COUNTS}: {track}")


def _layers_down(part: pd.DataFrame, r: Results) -> tuple[int, str]:
    """The layers that lose with one head: on the paper's metric those that drop significantly; on
    the likelihood those whose change lies wholly beyond -δ (``harmful``), the significant drops
    shown beside them (a likelihood finds thousandths of a nat significant)."""
    significant = int(part["significant_down"].sum())
    if not r.measure:
        return significant, str(significant)
    beyond = int(part["harmful"].sum())
    return beyond, f"{beyond} beyond δ ({significant} significant)"


def most_layers_one_head(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False)
    (down, text), layers = _layers_down(part, r), int(part["layers"].sum())
    return f"{text} of {layers} layers", three_way(down <= layers / 2, down < layers)


def last_enc_dec(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False).set_index("kind")
    base = r["04_keep_one_translation"]["base"].iloc[0]
    worst = part.loc["enc_dec", "worst_delta"]
    most_hit = part["worst_delta"].idxmin() == "enc_dec"
    return (f"worst enc_dec layer {int(part.loc['enc_dec', 'worst_layer'])}: {worst:+.2f} BLEU of {base:.1f}",
            three_way(-worst >= 0.25 * base, most_hit))


def last_enc_dec_likelihood(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "translation", held_out=False).set_index("kind")
    kind = part["worst_delta"].idxmin()
    layer = int(part.loc[kind, "worst_layer"])
    last = kind == "enc_dec" and layer == int(part.loc["enc_dec", "layers"])
    return (f"worst layer: {kind} {layer} ({part.loc[kind, 'worst_delta']:+.1f} {part.loc[kind, 'unit']})",
            three_way(last, kind == "enc_dec"))


def bert_layers_one_head(r: Results) -> tuple[str, str]:
    part = _keep_one(r, "nli", held_out=False)
    (down, text), layers = _layers_down(part, r), int(part["layers"].sum())
    return f"{text} of {layers} layers", three_way(down == 0, down <= layers / 4)


def held_out_worse(r: Results) -> tuple[str, str]:
    held, held_text = _layers_down(_keep_one(r, "translation", held_out=True), r)
    same, same_text = _layers_down(_keep_one(r, "translation", held_out=False), r)
    layers = int(_keep_one(r, "translation", held_out=True)["layers"].sum())
    return f"{held_text} of {layers} held out, {same_text} chosen on the reported set", \
        three_way(held > same, held == same and held > 0)


def counts_sample(r: Results) -> str:
    return samples.one_head(r[COUNTS])


CLAIMS = [
    Claim("most_layers_one_head", "§3.3, Table 2", "Most layers can be reduced to one head (head chosen on the reported set)",
          "5 of 18 WMT layers drop significantly", "reproduced: at most half the layers drop significantly",
          CHAPTER, most_layers_one_head, likelihood=True, likelihood_rule=BEYOND_MARGIN_RULE, sample=counts_sample),
    Claim("last_enc_dec", "§3.3, Table 2", "The last Enc-Dec layer is the exception: it needs its heads",
          "-13.56 BLEU of 36.05 with one head", "reproduced: the worst Enc-Dec layer loses a quarter of the BLEU; "
          "partly: it is the worst layer of all kinds", CHAPTER, last_enc_dec,
          likelihood=last_enc_dec_likelihood, likelihood_rule="reproduced: the worst layer of all kinds is the last "
          "Enc-Dec layer; partly: an Enc-Dec layer", sample=counts_sample),
    Claim("bert_layers_one_head", "§3.3, Table 3", "No BERT layer needs more than one head", "0 of 12 layers drop significantly",
          "reproduced: no layer drops significantly; partly: at most a quarter", CHAPTER,
          bert_layers_one_head, likelihood=True, likelihood_rule=BEYOND_MARGIN_RULE, sample=counts_sample),
    Claim("held_out_worse", "App. A, Table 5", "Choosing the head on other data than the reported set costs more layers",
          "9 of 18 WMT layers (5 when chosen on the reported set)", "reproduced: more significant drops held out "
          "than chosen on the reported set; partly: as many, and some", CHAPTER, held_out_worse, likelihood=True,
          likelihood_rule=BEYOND_MARGIN_RULE, sample=counts_sample),
]
