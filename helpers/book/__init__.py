"""The book's machinery, one folder per job; imports go down this list, never up:

* ``running/``: the runner (papermill, one chapter at a time, cached by the code it imports),
  the costs page and the paper profile's downloads;
* ``verdicts/``: the engine that judges a claim, each chapter's claims and rules (``rules/``), the
  scorecard that gathers them, and the chapters' generated findings;
* ``experiments/``: one module per experiment of the paper (``head_effects``: the significance
  tables over cached sweeps);
* ``course/``: a profile's models, built once under torchrun-aware coordination, loaded by name;
* ``profiles/`` (a profile and the chapters' parameters, checked before anything runs),
  ``store/`` (result tables, the sweep cache, sharding, progress lines) and ``paper/`` (the
  paper's reported numbers).

Imports ``helpers.zoo`` and ``helpers.heads``; nothing imports this package back
(``tests/test_layout.py`` checks both orders).
"""
