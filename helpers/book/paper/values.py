"""The paper's reported numbers as data (Michel, Levy & Neubig 2019, v3; each with the table, figure
or section it comes from), so notebooks can show them beside ours.

Layers and heads are 1-based here, as printed in the paper; ``significant`` marks the cells the
paper underlines (p < 0.01, paired bootstrap with compare-mt).
"""

from __future__ import annotations

import io

import pandas as pd

from ...heads.sites import SEQ2SEQ_KINDS as KINDS  # WMT's attention kinds, in the paper's order

# Table 1: BLEU change on newstest2013 when one Enc-Enc head of the WMT model is masked
# (base BLEU 36.05). Columns: layer, head, delta, significant.
_TABLE1 = """layer,head,delta,significant
    1,1,0.03,0
    1,2,0.07,0
    1,3,0.05,0
    1,4,-0.06,0
    1,5,0.03,0
    1,6,-0.53,1
    1,7,0.09,0
    1,8,-0.33,1
    1,9,0.06,0
    1,10,0.03,0
    1,11,0.11,0
    1,12,0.04,0
    1,13,0.01,0
    1,14,-0.04,0
    1,15,0.04,0
    1,16,0.00,0
    2,1,0.01,0
    2,2,0.04,0
    2,3,0.10,0
    2,4,0.20,1
    2,5,0.06,0
    2,6,0.03,0
    2,7,0.00,0
    2,8,0.09,0
    2,9,0.10,0
    2,10,0.04,0
    2,11,0.15,1
    2,12,0.03,0
    2,13,0.05,0
    2,14,0.04,0
    2,15,0.14,0
    2,16,0.04,0
    3,1,0.05,0
    3,2,-0.01,0
    3,3,0.08,0
    3,4,0.09,0
    3,5,0.11,0
    3,6,0.02,0
    3,7,0.03,0
    3,8,0.03,0
    3,9,-0.00,0
    3,10,0.13,0
    3,11,0.09,0
    3,12,0.09,0
    3,13,-0.11,0
    3,14,0.24,1
    3,15,0.07,0
    3,16,-0.04,0
    4,1,-0.02,0
    4,2,0.03,0
    4,3,0.13,0
    4,4,0.06,0
    4,5,-0.05,0
    4,6,0.13,0
    4,7,0.14,0
    4,8,0.05,0
    4,9,0.02,0
    4,10,0.14,0
    4,11,0.05,0
    4,12,0.06,0
    4,13,0.03,0
    4,14,-0.06,0
    4,15,-0.10,0
    4,16,-0.06,0
    5,1,-0.31,1
    5,2,-0.11,0
    5,3,-0.04,0
    5,4,0.12,0
    5,5,0.10,0
    5,6,0.02,0
    5,7,0.09,0
    5,8,0.08,0
    5,9,0.04,0
    5,10,0.21,1
    5,11,-0.02,0
    5,12,0.02,0
    5,13,-0.03,0
    5,14,-0.04,0
    5,15,0.07,0
    5,16,-0.02,0
    6,1,0.06,0
    6,2,0.07,0
    6,3,-0.31,1
    6,4,0.15,0
    6,5,-0.19,0
    6,6,0.15,0
    6,7,0.11,0
    6,8,0.05,0
    6,9,0.01,0
    6,10,-0.08,0
    6,11,0.06,0
    6,12,0.01,0
    6,13,0.01,0
    6,14,0.02,0
    6,15,0.07,0
    6,16,0.05,0
"""

# Tables 2 and 5 (WMT, keep one head per layer; best delta per layer) and 3 and 6 (BERT).
_TABLE2 = """layer,enc_self,enc_dec,dec_self,sig_enc_self,sig_enc_dec,sig_dec_self
    1,-1.31,0.24,-0.03,1,1,0
    2,-0.16,0.06,0.12,0,0,0
    3,0.12,0.05,0.18,0,0,0
    4,-0.15,-0.24,0.17,0,0,0
    5,0.02,-1.55,-0.04,0,1,0
    6,-0.36,-13.56,0.24,1,1,0
"""
_TABLE5 = """layer,enc_self,enc_dec,dec_self,sig_enc_self,sig_enc_dec,sig_dec_self
    1,-1.96,0.02,0.03,1,0,0
    2,-0.57,0.09,-0.13,1,0,0
    3,-0.45,-0.42,0.00,1,1,0
    4,-0.30,-0.60,-0.31,0,1,0
    5,-0.32,-2.75,-0.66,0,1,1
    6,-0.67,-18.89,-0.03,1,1,0
"""
# accuracy change in percentage points; no cell significant
_TABLE3 = """layer,delta
    1,-0.01
    2,0.10
    3,-0.14
    4,-0.53
    5,-0.29
    6,-0.52
    7,0.05
    8,-0.72
    9,-0.96
    10,0.07
    11,-0.19
    12,-0.12
"""
_TABLE6 = """layer,delta
    1,-0.01
    2,-0.02
    3,-0.26
    4,-0.53
    5,-0.29
    6,-0.52
    7,0.05
    8,-0.72
    9,-0.96
    10,0.07
    11,-0.19
    12,-0.15
"""

WMT_BASE_BLEU = 36.05  # newstest2013
# §2: heads per layer of the paper's models (WMT Transformer-large: 6 + 6 layers; BERT-base: 12 layers)
HEADS_PER_LAYER = {"WMT": 16, "BERT": 12}
HEADS_PER_KIND = {"WMT": 96}  # 6 layers x 16 heads of each attention kind (Figure 4)
SIGNIFICANT_ENC_SELF = 8  # of 96 Enc-Enc heads (Table 1) ...
SIGNIFICANT_ENC_SELF_UP = 4  # ... of which 4 increase BLEU
CROSS_DOMAIN_R = {"translation": 0.56, "classifier": 0.68}  # Fig. 2, Pearson r

# §4.2, Figure 3: share of all heads prunable by I_h with no noticeable loss (WMT, BERT).
PRUNABLE_SHARE = {"translation": 0.20, "classifier": 0.40}

# §4.3, Table 4: BERT on MNLI-matched, GTX 1080Ti, examples/s (mean, std) by batch size, and the
# speed-ups the paper prints (computed by the authors from unrounded means).
TABLE4_THROUGHPUT = {
    "original": {1: (17.0, 0.3), 4: (67.3, 1.3), 16: (114.0, 3.6), 64: (124.7, 2.9)},
    "pruned": {1: (17.3, 0.6), 4: (69.1, 1.3), 16: (134.0, 3.6), 64: (146.6, 3.4)},
}
TABLE4_SPEEDUP = {1: 0.019, 4: 0.027, 16: 0.175, 64: 0.175}

# §5, Figure 4 (read off the figure): BLEU with 80% of one kind's heads pruned. Pruning more than
# 60% of the Enc-Dec heads brings BLEU close to 0; Enc-Enc and Dec-Dec still give about 30.
FIGURE4_BLEU_AT_80 = {"enc_self": 30.0, "enc_dec": 0.0, "dec_self": 30.0}

# §6, Figure 5: unpruned BLEU of the IWSLT model by epoch (brackets under the x axis), and the
# claim: from about epoch 10, 40% of heads pruned keeps 85 to 90% of the BLEU.
FIGURE5_BLEU = {1: 3.0, 2: 6.2, 3: 18.1, 5: 26.9, 10: 30.6, 20: 34.5, 30: 34.7, 40: 34.9}
FIGURE5_EPOCH_PRUNABLE = 10
FIGURE5_KEPT_AT_40 = (0.85, 0.90)

# Appendix B, Figure 6 (read off the figure): the metric of the unpruned model and the share
# pruned by I_h before the curve leaves its flat start, by the paper's task, with the course task
# that plays its role (helpers.zoo.recipes.TASKS).
FIGURE6 = pd.DataFrame(
    [
        {"task": "SST-2", "course_task": "sentiment", "metric": "accuracy", "unpruned": 0.92, "flat_until": 0.6},
        {"task": "CoLA", "course_task": "acceptability", "metric": "matthews", "unpruned": 0.57, "flat_until": 0.5},
        {"task": "MRPC", "course_task": "paraphrase", "metric": "f1", "unpruned": 0.88, "flat_until": 0.5},
        {"task": "IWSLT", "course_task": "translation", "metric": "BLEU", "unpruned": 33.0, "flat_until": 0.2},
    ]
)


def _read(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text.replace("\n    ", "\n")))


def table(number: int) -> pd.DataFrame:
    """Table 1, 2, 3, 5 or 6 of the paper as a DataFrame."""
    tables = {1: _TABLE1, 2: _TABLE2, 3: _TABLE3, 5: _TABLE5, 6: _TABLE6}
    if number not in tables:
        raise KeyError(f"the paper's tables with per-head or per-layer numbers are {sorted(tables)}")
    return _read(tables[number])


def effects(number: int) -> pd.DataFrame:
    """A table in the long form of ``helpers.book.experiments.head_effects`` (``kind``, 0-based ``layer`` and
    ``head``, ``delta``, ``significant``), so the same table functions lay out ours and theirs.
    Accuracy changes (Tables 3, 6) become fractions, like ours; BERT's kind is ``self``."""
    t = table(number)
    if number == 1:
        return pd.DataFrame(
            {
                "kind": "enc_self",
                "layer": t["layer"] - 1,
                "head": t["head"] - 1,
                "delta": t["delta"],
                "significant": t["significant"].astype(bool),
            }
        )
    if number in (3, 6):
        return pd.DataFrame({"kind": "self", "layer": t["layer"] - 1, "delta": t["delta"] / 100, "significant": False})
    return pd.DataFrame(
        [
            {"kind": kind, "layer": layer - 1, "delta": row[kind], "significant": bool(row[f"sig_{kind}"])}
            for layer, row in t.set_index("layer").iterrows()
            for kind in KINDS
        ]
    )
