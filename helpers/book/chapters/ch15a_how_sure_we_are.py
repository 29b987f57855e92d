"""Chapter 15a's worked examples: each tool the book adds to decide a claim, on simulated data,
through the library's own functions. Each function draws its data from ``seed`` and returns the
table the chapter shows (and saves)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

from ...heads.metrics import accuracy_stats, log_likelihood
from ...heads.significance import (
    calibrated_level,
    chance_flag_rate,
    equivalence_class,
    null_p_values,
    paired_bootstrap,
    resample_indices,
    resolution,
)
from ...sweeps.sequential import look_alpha
from ..store.results import saved_table
from ..verdicts.engine import NOT_REPRODUCED, PARTLY, REPRODUCED
from ..verdicts.pooling import mean_over_seeds, over_interval

MARGIN = 0.1  # section 1's δ, in the simulated score's units
LOOK_EXAMPLES = 400  # section 3: examples per simulated head (the first look sees half)
FAMILY = 144  # section 6: heads tested at once where chapter 03 has not run (the paper's WMT model has 144)
FAMILY_LEVEL = 0.05  # section 6: the family-wise level of "some head's gain"
POOL_THRESHOLD = 0.3  # section 5's rule: reproduced at this share or more, partly above 0


def _mean(sums: np.ndarray) -> float:  # summed (value, 1) statistics -> the mean value
    return float(sums[0] / sums[1])


def _with_ones(values: np.ndarray) -> np.ndarray:  # [N] values -> [N, 2] statistics (value, 1)
    return np.stack([values, np.ones_like(values)], 1)


def margin_example(alpha: float, n_resamples: int, seed: int, n: int = 2000) -> pd.DataFrame:
    """Section 1: two simulated heads scored on ``n`` examples, one with a tiny real effect and one
    with none but a noisy score; each one's change, its interval, significance and class."""
    rng = np.random.default_rng(seed)
    full = rng.normal(0.0, 1.0, n)  # each example's score, full model
    heads = {"tiny real effect": full + rng.normal(-0.02, 0.1, n), "no effect, noisy": full + rng.normal(0.0, 3.0, n)}
    indices = resample_indices(n, n_resamples, seed)
    rows = []
    for name, masked in heads.items():
        r = paired_bootstrap(_with_ones(full), _with_ones(masked), score=_mean, indices=indices, alpha=alpha)
        rows.append((name, r.delta, r.low, r.high, r.significant, equivalence_class(r.low, r.high, MARGIN)))
    return pd.DataFrame(rows, columns=["head", "change", "low", "high", "significant", "class"])


def two_scores_example(alpha: float, n_resamples: int, seed: int, n: int = 1000) -> pd.DataFrame:
    """Section 2: one simulated head that lowers every example's gold-label logit by 0.05, tested
    on accuracy and on the gold label's log-likelihood, on the same examples and resamples."""
    rng = np.random.default_rng(seed)
    logit = rng.normal(2.0, 2.0, n)  # the gold label's logit, full model
    masked = logit - 0.05 + rng.normal(0.0, 0.05, n)
    gold = np.ones(n, dtype=int)
    indices = resample_indices(n, n_resamples, seed)
    scores = {
        "accuracy": (accuracy_stats(logit > 0, gold), accuracy_stats(masked > 0, gold), _mean),
        "likelihood": (_with_ones(np.logaddexp(0, -logit)), _with_ones(np.logaddexp(0, -masked)), log_likelihood),
    }
    rows = []
    for name, (a, b, score) in scores.items():
        r = paired_bootstrap(a, b, score=score, indices=indices, alpha=alpha)
        rows.append((name, r.delta, r.p_value, r.significant))
    return pd.DataFrame(rows, columns=["score", "change", "p", "significant"])


def _flagged(values: np.ndarray, level: float) -> np.ndarray:
    """Per row of ``values`` [heads, examples]: the two-sided test of a zero mean at ``level``."""
    z = values.mean(1) / (values.std(1) / np.sqrt(values.shape[1]))
    return norm.sf(np.abs(z)) < level


def looks_example(alpha: float, heads: int, seed: int) -> pd.DataFrame:
    """Section 3: ``heads`` simulated heads with no effect, each taking both looks (half of the
    examples, then all: the worst case); the share flagged by one look, two looks at alpha/2 and
    two looks at alpha, beside chance's share."""
    noise = np.random.default_rng(seed).normal(0.0, 1.0, (heads, LOOK_EXAMPLES))
    half, every, level = noise[:, : LOOK_EXAMPLES // 2], noise, look_alpha(alpha)
    rates = {
        "one look at alpha": _flagged(every, alpha).mean(),
        "two looks at alpha/2": (_flagged(half, level) | _flagged(every, level)).mean(),
        "two looks at alpha": (_flagged(half, alpha) | _flagged(every, alpha)).mean(),
    }
    return pd.DataFrame({"test": list(rates), "flags": list(rates.values()), "chance": chance_flag_rate(alpha)})


def calibration_example(alpha: float, draws: int, seed: int, units: tuple[int, ...] = (8, 30, 100)) -> pd.DataFrame:
    """Section 4: a head whose per-verse likelihood changes are heavy-tailed, centred so that it
    changes nothing; for each sample size in ``units``, the share of null tests flagged at
    ``alpha``, the calibrated level (fitted on ``draws`` tests) and the share a fresh set flags
    at it."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(10, 40, 200)
    base = np.stack([tokens * 2.0, tokens], 1)  # each verse's summed loss and tokens, full model
    changed = base + np.stack([rng.lognormal(0.0, 1.0, 200) * 0.2, np.zeros(200)], 1)
    rows = []
    for n in units:
        fit, fresh = (null_p_values([(base, changed)], n, draws=draws, seed=s) for s in (seed, seed + 1))
        level = calibrated_level(fit, alpha)
        rows.append((n, np.mean(fresh < alpha), level, np.mean(fresh < level), chance_flag_rate(alpha)))
    return pd.DataFrame(rows, columns=["units", "flags at alpha", "calibrated level", "flags at it", "chance"])


def _share_rule(share: float) -> str:
    return REPRODUCED if share >= POOL_THRESHOLD else PARTLY if share > 0 else NOT_REPRODUCED


POOL_EXAMPLES = {  # two seeds' prunable shares and their standard errors
    "both well above": ([0.45, 0.40], [0.03, 0.03]),
    "one above, one below": ([0.40, 0.20], [0.03, 0.03]),
    "both noisy": ([0.35, 0.30], [0.2, 0.2]),
}


def pooling_example() -> pd.DataFrame:
    """Section 5: three pairs of seeds, each pooled (``mean_over_seeds``) and the rule read over
    the pooled interval (``over_interval``)."""
    rows = []
    for name, (shares, errors) in POOL_EXAMPLES.items():
        pooled = mean_over_seeds(shares, errors)
        rows.append((name, pooled.text("{:.2f}"), over_interval(_share_rule, pooled)))
    return pd.DataFrame(rows, columns=["seeds", "pooled share", "verdict"])


def chapter_03_family(profile: str) -> int:
    """How many heads chapter 03's "some head's gain" corrects over at once: every head of one
    training seed's models, from its saved counts (our rows; the largest seed's family where
    seeds differ); ``FAMILY`` where chapter 03 has not run on ``profile``."""
    counts = saved_table(profile, "03_one_head_counts")
    if counts is None:
        return FAMILY
    ours = counts[~counts["from_paper"].fillna(False).astype(bool)] if "from_paper" in counts else counts
    return int(ours.groupby(ours["training_seed"].fillna(-1))["heads"].sum().max())


def many_heads_example(alpha: float, heads: int, seed: int, family: int = FAMILY) -> pd.DataFrame:
    """Section 6: families of ``family`` heads with no effect (``heads`` in all); the share of
    families in which some head's gain passes, each head tested at ``alpha`` and with Bonferroni.
    The family's size is a column (``heads tested at once``)."""
    z = np.random.default_rng(seed).normal(size=(max(1, heads // family), family))
    gains = {
        "each head at p < alpha": norm.sf(z) < alpha,
        f"Bonferroni, {FAMILY_LEVEL} over the family": norm.sf(z) < FAMILY_LEVEL / family,
    }
    return pd.DataFrame(
        {
            "test": list(gains),
            "heads tested at once": family,
            "families with a false gain": [g.any(1).mean() for g in gains.values()],
        }
    )


def many_heads_line(families: pd.DataFrame) -> str:
    """Section 6's sentence, from ``many_heads_example``'s table."""
    family = int(families["heads tested at once"].iloc[0])
    return (
        f"Chapter 03 tests {family} heads at once (every head of one seed's models), so each head is "
        f"tested at {FAMILY_LEVEL} / {family}."
    )


def rounding_example(alpha: float, n_resamples: int, seed: int, n: int = 400) -> pd.DataFrame:
    """Section 7: ``n`` simulated verses' likelihoods (10 to 40 tokens, about 2.6 nats a token,
    float32 numbers) and two changes of one sign on every verse: one float32 step each, as a
    rounding that leans one way gives, and ten times the resolution. Each tested without the
    resolution (as before it) and with it."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(10, 41, n).astype(np.float64)
    nll = (tokens * rng.gamma(8.0, 2.6 / 8.0, n)).astype(np.float32)
    full = np.stack([nll.astype(np.float64), tokens], 1)
    smallest = resolution(full, log_likelihood)
    rounded, real = full.copy(), full.copy()
    rounded[:, 0] = np.nextafter(nll, np.float32(np.inf)).astype(np.float64)
    real[:, 0] *= 1 + 10 * smallest / (full[:, 0].sum() / full[:, 1].sum())
    indices = resample_indices(n, n_resamples, seed)
    rows = []
    for name, masked in (("one float32 step up, every verse", rounded), ("10 x the resolution", real)):
        change = log_likelihood(masked.sum(0)) - log_likelihood(full.sum(0))
        for test, limit in (("without the resolution", 0.0), ("with it", None)):
            r = paired_bootstrap(full, masked, score=log_likelihood, indices=indices, alpha=alpha, smallest=limit)
            rows.append((name, change, test, r.delta, r.p_value, r.significant, smallest))
    columns = ["change", "measured", "test", "delta", "p", "significant", "resolution"]
    return pd.DataFrame(rows, columns=columns)


def resolution_line(table: pd.DataFrame) -> str:
    """Section 7's resolution in words, from ``rounding_example``'s table."""
    from ...heads.significance import FLOAT32_EPS, ROUNDING_EPS

    return (
        f"The resolution is {ROUNDING_EPS} float32 epsilons ({FLOAT32_EPS:.2g} each) times the mean negative "
        f"log-likelihood per token: {table['resolution'].iloc[0]:.2g} nats on these verses."
    )
