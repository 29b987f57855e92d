"""Names that a results table's writer (an experiment) and its readers (the scorecard, the
findings) share, kept here so that neither parses them back from the other's strings."""

from __future__ import annotations

# A pruning curve's random orders, summarised as their mean and a band of percentiles
RANDOM_MEAN, RANDOM_LOW, RANDOM_HIGH = "random (mean)", "random (5%)", "random (95%)"
BAND = (0.05, 0.95)  # the quantiles RANDOM_LOW and RANDOM_HIGH stand for
CHOSEN = ("importance", "ablation", "L0 gates")  # the orders that choose heads (random is the baseline)
MIN_BAND_ORDERS = 19  # fewer random orders make no 5-95% band: a rule reading one says "cannot tell"

# What an order was estimated on (a summary's ``selected_on``): this value marks an order read
# off the very examples its curve scores, which no rule compares with out-of-sample orders
IN_SAMPLE = "the scored set (in-sample)"

# Chapter 13b's copying summary (``buys_and_breaks.copying_summary``), per tolerance on the verse
# perplexity (a share: 0.10 is "within 10%") and per order
COPYING_TOLERANCES = (0.01, 0.10)  # the paper's "no noticeable loss" (1%) and chapter 11's looser 10%
UNPRUNED_COPYING = "unpruned copying accuracy"
INDUCTION_TOP = 5  # "the induction heads": the five with the highest induction score


def prunable_within(tolerance: float) -> str:
    """The share of query heads prunable before the verse perplexity rises more than ``tolerance``."""
    return f"prunable within {tolerance:.0%} (verses)"


def copying_at(tolerance: float) -> str:
    """Copying accuracy at that share."""
    return f"copying accuracy at {tolerance:.0%}"


def copying_below(floor: float) -> str:
    """The first share at which copying accuracy falls below ``floor`` of the unpruned model's."""
    return f"copying accuracy below {floor:.0%} of unpruned from"


def random_copying_at(tolerance: float, quantile: str) -> str:
    """The random band's copying accuracy at that share, at ``quantile`` ("5%" or "95%")."""
    return f"random copying accuracy at {tolerance:.0%} ({quantile})"


def random_orders_at(tolerance: float) -> str:
    """How many random orders the band at that share holds."""
    return f"random orders at {tolerance:.0%}"


def copying_kept_interval(tolerance: float, end: str) -> str:
    """The interval over the verdict probe's sequences of the copying accuracy kept (pruned over
    unpruned) at that share, at ``end`` ("low" or "high"; "level": the percentile level its
    calibration chose)."""
    return f"copying kept at {tolerance:.0%} ({end})"


COPYING_KEPT = "copying kept at {:.0%}"  # the point estimate on the verdict probe, by tolerance
VERDICT_SEQUENCES = "verdict probe sequences"


def shown(index: int) -> int:
    """A layer, head or KV group as every page numbers it: from 1, as the paper's tables do. The
    saved tables keep the 0-based index the code uses (``layer``, ``head``)."""
    return int(index) + 1
