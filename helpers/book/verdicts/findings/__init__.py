"""The "What this run shows" paragraphs of the chapters, written from the run's own result tables:
one module per chapter (``ch03`` ... ``ch15``), ``text`` for what they share.

A paragraph that quotes numbers by hand goes stale the moment a reader reruns a chapter with
another model, profile or seed. Each function here reads the tables a chapter has just saved
under ``results/<profile>/`` and returns Markdown whose every number comes from them; the
chapter displays it in its last cell. The static text around it keeps only what does not change.

Counts are stated per training seed, beside what chance alone gives (a test at p < alpha flags
about 2·alpha of the heads that have no effect, alpha in each direction), and once per measure: the paper's metric
(BLEU, accuracy) and the likelihood (``head_effects``).

The text states numbers; it judges no claim of the paper and does not restate a verdict: where
a chapter tests one, its verdict table (``engine.show_verdicts`` on its ``rules/chNN``) stands
just above this text, and is the scorecard's own.

A chapter imports only its own module (``from helpers.book.verdicts.findings import ch03``), so an edit
to one chapter's sentences reruns that chapter alone (``running.chapter_code``); this file imports
nothing, for the same reason.
"""
