"""Chapter 05's claim (§3.4, Figure 2): a head's effect in domain predicts its effect out of
domain. The rule reads the heads' changes in and out of domain (``05_cross_domain_translation``,
``05_cross_domain_classifier``), the same rows ``05_cross_domain_r`` summarises."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...paper import values as paper_values
from .. import samples
from ..between_seeds import Pairs
from ..engine import Claim, Results, three_way

CHAPTER = "05_cross_domain"
STRONG_R = 0.40  # "effects in domain predict effects out of domain": Pearson r at least this
LEVEL = 0.01  # ... with its interval (1 - LEVEL, over the heads) above 0
DRAWS = 2000  # bootstrap resamples of the heads
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


def pooled_r(heads: pd.DataFrame, draws: int = DRAWS, seed: int = 0) -> tuple[float, np.ndarray, dict]:
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
    heads; strong where r >= ``STRONG_R`` and the interval lies above 0. Reproduced: strong for
    every model; partly: for some."""
    parts, strong = [], []
    for model, heads in _pairs(r).items():
        r_all, draws, _ = pooled_r(heads)
        if np.isnan(r_all):  # some seed's heads change nothing in or out of domain
            strong.append(False)
            parts.append(f"{model} r undefined (no change to correlate)")
            continue
        low, high = np.nanquantile(draws, [LEVEL / 2, 1 - LEVEL / 2])
        strong.append(r_all >= STRONG_R and low > 0)
        parts.append(f"{model} r = {r_all:.2f} [{low:.2f}, {high:.2f}]")
    seeds = f" ({len(r.seeds)} seeds pooled)" if len(r.seeds) > 1 else ""
    return "; ".join(parts) + seeds, three_way(all(strong), any(strong))


def correlation_statistic(r: Results) -> dict[str, Pairs]:
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
        f"reproduced: r >= {STRONG_R} for every model, with its {1 - LEVEL:.0%} bootstrap interval over the heads "
        "above 0 (r pooled over the seeds as the mean of Fisher's z); partly: for one",
        CHAPTER,
        cross_domain,
        likelihood=True,
        sample=lambda r: samples.correlation(r["05_cross_domain_r"], LEVEL),
        seed_statistic=correlation_statistic,
    ),
]
