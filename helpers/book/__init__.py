"""The book's machinery: what runs the chapters on a profile and keeps their results.

* profiles.py (``profiles/<name>.yml``), runner.py (papermill, one notebook at a time, cached by
  fingerprint), downloads.py (the command line for the paper's downloads);
* course.py: a profile's models, built once under torchrun-aware coordination, loaded by name;
* results.py (tables under ``results/<profile>/``), sweep_cache.py (a model's outputs per
  head mask, on disk), shards.py (splitting sweeps over torchrun processes);
* head_effects.py: the chapters' significance tables over cached sweeps;
* paper_values.py (the numbers the paper reports) and scorecard.py (ours against them).

Imports ``helpers.zoo`` and ``helpers.heads``; nothing imports this package back.
"""
