"""Names that a results table's writer (an experiment) and its readers (the scorecard, the
findings) share, kept here so that neither parses them back from the other's strings."""
from __future__ import annotations

# A pruning curve's random orders, summarised as their mean and a band of percentiles
RANDOM_MEAN, RANDOM_LOW, RANDOM_HIGH = "random (mean)", "random (5%)", "random (95%)"
BAND = (0.05, 0.95)   # the quantiles RANDOM_LOW and RANDOM_HIGH stand for
CHOSEN = ("importance", "ablation", "L0 gates")   # the orders that choose heads (random is the baseline)
MIN_BAND_ORDERS = 19  # fewer random orders make no 5-95% band: a rule reading one says "cannot tell"

# What an order was estimated on (a summary's ``selected_on``): this value marks an order read
# off the very examples its curve scores, which no rule compares with out-of-sample orders
IN_SAMPLE = "the scored set (in-sample)"
