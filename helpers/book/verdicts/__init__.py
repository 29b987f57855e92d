"""The machinery that turns a chapter's rule and a run's result tables into a verdict, and knows no
claim: the engine (``engine``), pooling over training seeds (``pooling``, ``between_seeds``), what a
verdict rests on (``samples``) and the words findings share (``text``). Each chapter's claims live
in its module under ``helpers.book.chapters``; the scorecard gathers them (``helpers.book.scorecard``)."""
