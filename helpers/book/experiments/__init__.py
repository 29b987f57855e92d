"""The chapters' experiments, one module per experiment, so that a notebook keeps only the calls
that teach what its section does: ``sweeps`` (one chapter's head-mask sweeps over every training
run of a model), ``one_head`` (§3.2), ``keep_one`` (§3.3), ``cross_domain`` (§3.4).

Like ``findings``, this file imports nothing: a chapter that imports one module reruns when that
module changes, not when another chapter's does (``book.chapter_code``).
"""
