"""The book's machinery, one folder per job; a folder imports only the folders below it:

* ``running/``: the runner (papermill, one chapter at a time, cached by the code it imports and
  the tables it reads), the costs page, the paper profile's downloads, the laptop check, the
  teacher's key and the GPU check;
* ``scorecard/``: every claim gathered (``card``), the scorecard chapter, the front page and
  ``compare_builds``;
* ``chapters/``: one module per chapter, ``chNN_<notebook>.py``: its experiment's helpers, its
  claims and rules, its findings;
* ``verdicts/``: the engine that turns a claim's rule and a run's tables into a verdict, the
  between-seed test, pooling, the samples a verdict rests on, and the words findings share;
* ``experiments/``: the experiments several chapters run (``head_effects``: the significance
  tables over cached sweeps; pruning runs, equivalence margins, served models);
* ``course/``: a profile's models, built once and loaded by name, and their bundles;
* ``profiles/`` (a profile and the chapters' parameters, checked before anything runs),
  ``store/`` (result tables, the book's measures, the sweep cache, sharding, progress lines) and
  ``paper/`` (the paper's reported numbers).

Imports ``helpers.zoo`` and ``helpers.heads``; nothing imports this package back
(``tests/test_layout.py`` checks both orders and this list).
"""
