"""Experiment code that several chapters share, so that a notebook keeps only the calls that
teach what its section does (a chapter's own experiment is in its module, ``helpers.book.chapters``):

* ``head_effects``: the significance tables over cached sweeps; ``equivalence``: margins and classes;
* ``sweeps``: one chapter's head-mask sweeps over every training run of a model (``HeadSweeps``);
* ``pruning_runs``: greedy pruning curves over training runs (§4.2; chapters 06, 08, 09, 10, 12);
  ``importance_sample``: how I_h moves with the examples it is estimated on;
* ``buys_and_breaks`` and ``served``: SmolLM2 pruned, measured in transformers and in llama.cpp
  (chapters 13, 13b, 14b).

Like ``helpers.book.chapters``, this file imports nothing: a chapter that imports one module reruns
when that module changes, not when another chapter's does (``book.running.chapter_code``).
"""
