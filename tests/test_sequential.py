"""Stop when decided: two looks at the examples keep each error at or below its nominal rate.

Simulated heads with known true changes in a likelihood (per-example negative log-likelihoods,
paired with the unmasked model's): heads on the margin (a true change of exactly -δ) must be
called negligible at most alpha of the time, heads with no change called significant at most as
often as the one-look test calls them (2·alpha: its p-value is taken in the observed direction),
and heads far beyond the margin mostly stop at the first look.
"""

import numpy as np
import pandas as pd
import pytest

from helpers.book.experiments.head_effects import SweepScore, effect_rows, two_look_rows
from helpers.heads.metrics import log_likelihood
from helpers.heads.significance import Bootstrap, equivalence_class
from helpers.sweeps.ablation import UNMASKED
from helpers.sweeps.sequential import look_split

DELTA = np.log(1.01)  # 1% of perplexity, the book's likelihood margin
N, ALPHA, RESAMPLES = 200, 0.05, 400


def _nll(stats: np.ndarray) -> np.ndarray:
    return np.stack([stats, np.ones_like(stats)], 1)


def simulate(true_changes: np.ndarray, seed: int):
    """``(n, configs, outputs)`` for ``two_look_rows``: per-example NLLs of the unmasked model and
    of one head per true change (in mean log-likelihood: a change c adds -c to every example's NLL
    on average), with noise 4·δ per example."""
    rng = np.random.default_rng(seed)
    base = rng.gamma(4.0, 0.5, N)
    configs = [("self", 0, (h,)) for h in range(len(true_changes))]
    masked = {c: base - change + rng.normal(0, 4 * DELTA, N) for c, change in zip(configs, true_changes)}
    rows = {UNMASKED: base, **masked}
    asked = []

    def outputs(positions, wanted):
        asked.append((len(positions), len(wanted)))
        return {c: rows[c][positions] for c in wanted}

    return configs, outputs, rows, asked


MEASURE = SweepScore(stats=lambda outputs, positions: _nll(outputs), score=log_likelihood, margin=DELTA)


def _one_look(configs, rows, seed):
    return effect_rows(
        configs,
        _nll(rows[UNMASKED]),
        stats_of=lambda c: _nll(rows[c]),
        score=log_likelihood,
        bootstrap=Bootstrap(RESAMPLES, ALPHA, seed),
    )


def _classes(table):
    return pd.Series([equivalence_class(lo, hi, DELTA) for lo, hi in zip(table["delta_low"], table["delta_high"])])


@pytest.mark.parametrize("scenario", ["on the margin", "no change"])
def test_two_looks_keep_false_negligible_and_false_positive_rates_at_nominal(scenario):
    heads = 600
    change = -DELTA if scenario == "on the margin" else 0.0
    one, two = [], []
    for rep in range(4):  # 2,400 simulated heads in all
        configs, outputs, rows, _ = simulate(np.full(heads, change), seed=rep)
        (table,) = two_look_rows(
            N, configs, outputs=outputs, measures=[MEASURE], bootstrap=Bootstrap(RESAMPLES, ALPHA, seed=rep)
        )
        one.append(_one_look(configs, rows, rep))
        two.append(table)
    one, two = pd.concat(one, ignore_index=True), pd.concat(two, ignore_index=True)
    se = np.sqrt(ALPHA * (1 - ALPHA) / len(two))
    if scenario == "on the margin":
        rate_one, rate_two = (_classes(one) == "negligible").mean(), (_classes(two) == "negligible").mean()
        assert rate_two <= ALPHA + 3 * se, f"two looks call {rate_two:.3%} of heads on the margin negligible"
        assert rate_one > 0.5 * ALPHA  # the simulation can detect such errors: one look makes them at about alpha
    else:
        rate_one, rate_two = one["significant"].mean(), two["significant"].mean()
        nominal = 2 * ALPHA  # the one-look test's own rate (p in the observed direction)
        assert rate_two <= nominal + 3 * np.sqrt(nominal * (1 - nominal) / len(two))
        assert rate_one > ALPHA  # ... which the simulation measures near 2 alpha
    assert set(two["look"]) <= {1, 2}


def test_heads_far_from_the_margin_stop_at_the_first_look_and_the_rest_see_every_example():
    changes = np.concatenate([np.full(40, -6 * DELTA), np.full(40, 0.0), np.full(40, -DELTA)])
    configs, outputs, rows, asked = simulate(changes, seed=7)
    (table,) = two_look_rows(
        N, configs, outputs=outputs, measures=[MEASURE], bootstrap=Bootstrap(RESAMPLES, ALPHA, seed=7)
    )
    first, rest = look_split(N, 0.5, 7)
    assert asked[0] == (len(first), len(configs) + 1)  # every head, and the unmasked model, on the first look
    assert asked[1][0] == len(rest) and asked[1][1] == 1 + (table["look"] == 2).sum()
    harmful = table.iloc[:40]
    assert (harmful["look"] == 1).mean() > 0.9 and (_classes(harmful) == "harmful").all()
    assert (table.iloc[80:]["look"] == 2).mean() > 0.5  # heads on the margin mostly need every example
    assert (table.loc[table["look"] == 2, "examples"] == N).all()
    assert (table.loc[table["look"] == 1, "examples"] == len(first)).all()
    # a head of the second look gets the one-look rows at alpha / 2 on all the examples
    later = table.index[table["look"] == 2][0]
    alone = effect_rows(
        [configs[later]],
        _nll(rows[UNMASKED]),
        stats_of=lambda c: _nll(rows[c]),
        score=log_likelihood,
        bootstrap=Bootstrap(RESAMPLES, ALPHA / 2, 7),
    ).iloc[0]
    assert table.loc[later, "delta"] == pytest.approx(alone["delta"])
    assert table.loc[later, "delta_low"] == pytest.approx(alone["delta_low"])
    # every row's base is the unmasked score on all the examples
    assert np.allclose(table["base"], log_likelihood(_nll(rows[UNMASKED]).sum(0)))
    # and every row, of either look, carries its change on the first look's examples (on which
    # best_per_layer compares heads of different looks)
    on_first = lambda c: (
        log_likelihood(_nll(rows[c])[first].sum(0)) - log_likelihood(_nll(rows[UNMASKED])[first].sum(0))
    )
    assert np.allclose(table["first_look_delta"], [on_first(c) for c in configs])
    assert np.allclose(table.loc[table["look"] == 1, "first_look_delta"], table.loc[table["look"] == 1, "delta"])
