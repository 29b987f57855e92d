"""The book's chapters, one module each, named like its notebook: the chapter's own experiment
code, the rules that judge its claims (``CLAIMS``) and its "What this run shows" paragraph
(``findings``). What several chapters share lives in ``helpers.book.experiments`` (head effects,
sweeps, pruning runs) and ``helpers.book.verdicts`` (the engine that turns a rule into a verdict,
pooling over seeds, the words findings share); the scorecard gathers every chapter's ``CLAIMS``
(``helpers.book.scorecard``).

A rule's threshold that the chapter also has as a parameter is a ``Claim.parameters`` entry,
read from the values the chapter ran with (``Results.params``), never a second constant.

A findings paragraph reads the tables the chapter has just saved under ``results/<profile>/``
and returns Markdown whose every number comes from them; the chapter displays it in its last
cell. Counts are stated per training seed, beside what chance alone gives, and once per measure
(the paper's metric and the likelihood). It judges no claim: the verdict table stands above it.

A notebook imports its own chapter's module, so an edit to one chapter reruns that chapter and
the pages that read every verdict (``running.chapter_code``); this file imports nothing, for the
same reason. Chapter 12 judges chapter 03's rules under other ways of removing a head, and
reads chapter 11's one-head grid, so it imports both.
"""
