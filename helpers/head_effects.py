"""Score changes when heads are masked, with the paper's significance test, as tables.

Each function returns one row per configuration (``kind``, ``layer``, ``heads`` masked; layers
and heads 0-based) with the masked score, ``delta`` = masked - unmasked, the paired-bootstrap
``p_value`` and ``significant`` (p < alpha). ``grid`` lays one kind out as layers x heads,
1-based like the paper's tables, with significant cells marked ``*``.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .ablation import Config, single_layer_sweep, translation_sweep
from .classifier_training import batches, encode
from .significance import (accuracy_from_stats, accuracy_stats, bleu_from_stats, bleu_stats,
                           paired_bootstrap, resample_indices)


def _rows(configs: Sequence[Config], base_stats, stats_of, score, n_resamples: int, alpha: float, seed: int):
    indices = resample_indices(len(base_stats), n_resamples, seed)
    base = score(base_stats.sum(0))
    rows = []
    for config in configs:
        stats = stats_of(config)
        test = paired_bootstrap(base_stats, stats, score, indices, alpha)
        kind, layer, heads = config
        rows.append({"kind": kind, "layer": layer, "heads": list(heads), "head": heads[0] if len(heads) == 1 else None,
                     "score": base + test.delta, "base": base, "delta": test.delta, "p_value": test.p_value,
                     "significant": test.significant})
    return pd.DataFrame(rows)


def classifier_effects(model, tokenizer, examples: Sequence, configs: Sequence[Config], max_length: int = 64,
                       batch_size: int = 64, n_resamples: int = 1000, alpha: float = 0.01, seed: int = 0,
                       progress: bool = True) -> pd.DataFrame:
    """Accuracy of a sequence classifier under each configuration (lower layers replayed)."""
    data = list(batches(encode(tokenizer, examples, max_length), batch_size))
    base, outs = single_layer_sweep(model, data, lambda m, b: m(**b).logits.argmax(-1), configs, progress=progress)
    gold = [e.label for e in examples]
    return _rows(configs, accuracy_stats(base, gold), lambda c: accuracy_stats(outs[c], gold), accuracy_from_stats,
                 n_resamples, alpha, seed)


def translation_effects(model, pairs: Sequence, configs: Sequence[Config], beam: int = 5, batch_size: int = 64,
                        n_resamples: int = 1000, alpha: float = 0.01, seed: int = 0, progress: bool = True
                        ) -> pd.DataFrame:
    """Tokenised BLEU of a translation model under each configuration (beam search)."""
    refs = [p.ref for p in pairs]
    base, outs = translation_sweep(model, [p.src for p in pairs], configs, beam=beam, batch_size=batch_size,
                                   progress=progress)
    return _rows(configs, bleu_stats(base, refs), lambda c: bleu_stats(outs[c], refs), bleu_from_stats,
                 n_resamples, alpha, seed)


def grid(df: pd.DataFrame, kind: str, scale: float = 1.0, digits: int = 2) -> pd.DataFrame:
    """Layers x heads table of ``delta * scale`` for ``kind`` (1-based), ``*`` where significant."""
    part = df[df["kind"] == kind]
    cells = part.assign(cell=[f"{d * scale:+.{digits}f}" + ("*" if s else "")
                              for d, s in zip(part["delta"], part["significant"])])
    table = cells.pivot(index="layer", columns="head", values="cell")
    table.index = [f"layer {i + 1}" for i in table.index]
    table.columns = [int(h) + 1 for h in table.columns]
    return table
