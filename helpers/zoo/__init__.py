"""Models and data: what the book's chapters study, and where each model comes from.

* registry.py: the one list of the book's models (``NAMED``: encoders and language models), the
  sources they come from (random, shipped, trained here, the paper's downloads) and their
  loaders, ``load_model`` and ``load_causal_lm``; shipped.py: the files PyPI packages ship
  (MiniLM, SmolLM2's GGUF and its conversion); locations.py: data and cache folders,
  ``MissingDownloadError``;
* generated tasks: lexicon.py, nli_task.py, translation_task.py, appendix_tasks.py,
  splits.py, demo_pairs.py;
* the paper's downloads: paper_sources.py (readers of GLUE, sacrebleu test sets, fairseq
  archives) and needs.py (what a profile reads, and fetching it);
* training recipes: classifier_training.py, translation_model.py, recipes.py, scorers.py
  (losses and scorers that feed ``heads.head_importance`` and the sweeps);
* model_cache.py: one folder per built model, keyed by its settings and code.

Imports ``helpers.base``, ``helpers.heads`` and ``helpers.sweeps`` from the rest of the package, never
``helpers.book``.
"""
