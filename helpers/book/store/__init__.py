"""Where a book run keeps what it computes, and how its processes share the work: result tables
under ``results/<profile>/`` (``results.py``), a model's outputs per head mask on disk
(``sweep_cache.py``), sweeps split over torchrun processes (``shards.py``) and the progress lines
and recorded times of chapters and models (``progress.py``). Imports nothing else of the book."""
