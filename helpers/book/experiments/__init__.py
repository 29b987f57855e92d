"""The chapters' experiments, one module per experiment, so that a notebook keeps only the calls
that teach what its section does:

* ``head_effects``: the significance tables over cached sweeps;
* ``sweeps``: one chapter's head-mask sweeps over every training run of a model (``HeadSweeps``);
* ``one_head`` (§3.2), ``keep_one`` (§3.3, App. A), ``cross_domain`` (§3.4), ``pruning`` (§4.2),
  ``speed`` (§4.3), ``attention_kinds`` (§5), ``dynamics`` (§6), ``more_tasks`` (App. B);
* ``models_table`` (chapter 02) and ``language_model`` (chapter 11, beyond the paper).

Like ``verdicts.findings``, this file imports nothing: a chapter that imports one module reruns when that
module changes, not when another chapter's does (``book.running.chapter_code``).
"""
