"""Our results against the paper's, all read from the result tables a run saved: the engine that
judges a claim (``engine``), each chapter's claims and rules (``rules/chNN``), the registry of
every claim and the scorecard (``scorecard``), and each chapter's generated "What this run shows"
text (``findings/chNN``)."""
