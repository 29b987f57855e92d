"""The book's two measures, defined once. Every chapter that measures what a head does measures it
twice: on the paper's metric and on the likelihood. Tables, sweeps, rules and verdict lines name
them from this table:

==========  ==============  ====================  ================================================
key         table suffix    name                  per-example statistics -> score
==========  ==============  ====================  ================================================
metric      (none)          the paper's metric    the task's metric: ``heads.metrics.METRICS``
                                                  (accuracy, Matthews, F1) or BLEU's n-gram counts
likelihood  ``_likelihood``  the likelihood       (negative log-likelihood, units) ->
                                                  ``heads.metrics.log_likelihood`` (nats per unit)
==========  ==============  ====================  ================================================

A chapter's table ``03_one_head_counts`` holds the metric's rows, ``03_one_head_counts_likelihood``
the likelihood's (``BookMeasure.table``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BookMeasure:
    """One of the book's measures: ``key`` (a sweep's ``measure`` argument), ``suffix`` (of its
    tables' names) and ``name`` (how pages and verdict lines call it)."""

    key: str
    suffix: str
    name: str

    def table(self, name: str) -> str:
        """The name of table ``name``'s version on this measure."""
        return f"{name}{self.suffix}"


METRIC = BookMeasure("metric", "", "the paper's metric")
LIKELIHOOD = BookMeasure("likelihood", "_likelihood", "the likelihood")
MEASURES = (METRIC, LIKELIHOOD)
BY_KEY = {m.key: m for m in MEASURES}
BY_SUFFIX = {m.suffix: m for m in MEASURES}
