"""The book's machinery, one folder per job; imports go down this list, never up:

* ``running/``: the runner (papermill, one chapter at a time, cached by the code it imports),
  the costs page and the paper profile's downloads;
* ``experiments/``: one module per experiment of the paper (``head_effects``: the significance
  tables over cached sweeps);
* ``course/``: a profile's models, built once under torchrun-aware coordination, loaded by name;
* ``verdicts/``: the paper's numbers, the registry that judges each claim (``scorecard``) and the
  chapters' generated findings;
* ``profiles/`` (a profile and the chapters' parameters, checked before anything runs) and
  ``store/`` (result tables, the sweep cache, sharding, progress lines).

Imports ``helpers.zoo`` and ``helpers.heads``; nothing imports this package back
(``tests/test_layout.py`` checks both orders).
"""
