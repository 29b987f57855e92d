"""Our results against the paper's: the numbers the paper reports (``paper_values.py``), the one
registry that judges each claim (``scorecard.py``) and each chapter's generated "What this run
shows" text (``findings/``), all read from the result tables a run saved."""
