"""Score changes when heads are masked, with the paper's significance test, as tables.

Each function returns one row per configuration (``kind``, ``layer``, ``heads`` masked; layers
and heads 0-based) with the masked score, ``delta`` = masked - unmasked, the paired-bootstrap
``p_value`` and ``significant`` (p < alpha), and ``score_even``/``score_odd``, the score on
each half of the examples. ``grid`` lays one kind out as layers x heads,
1-based like the paper's tables, with significant cells marked ``*``; ``significance_counts``
counts one model's significant changes per kind (Table 1's headline); ``best_per_layer``,
``held_out`` and ``layer_table`` make §3.3's tables from all-but-one effects;
``paired_scores`` and ``correlation`` compare two sets for §3.4.

Two measures per model: the paper's (a classifier's accuracy, a translation model's BLEU) and
the likelihood (``measure="likelihood"``; ``translation_likelihood_effects``): the mean
log-probability of the gold label per example, or of the reference per target token
(teacher-forced), in nats, higher is better. The likelihood sees every example's change, where
accuracy sees only flipped predictions and BLEU only changed n-grams of decoded output, so its
paired bootstrap has far more power on the same examples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ...base import ledger
from ...base.devices import to_device
from ...heads.metrics import (
    BleuDefinition,
    accuracy_from_stats,
    accuracy_stats,
    bleu_from_stats,
    bleu_stats,
    log_likelihood,
)
from ...heads.removal import HeadRemoval, reference_outputs
from ...heads.significance import (
    Bootstrap,
    equivalence_class,
    paired_bootstrap,
    require_units,
    resample_indices,
    resampled_sums,
)
from ...heads.sites import ENCODER_ONLY_KINDS, SEQ2SEQ_KINDS
from ...sweeps.ablation import UNMASKED, Config, single_layer_sweep
from ...sweeps.sequential import look_alpha, look_split, settled
from ...zoo import translation_model
from ...zoo.classifier_training import batches, by_length, encode, in_order
from ...zoo.first_token_only import first_token_only, supports_first_token_only
from ...zoo.scorers import masked_translations, single_layer_translation_nll, translation_reference
from ..store.columns import shown
from ..store.measures import BY_KEY
from ..store.sweep_cache import SweepCache, sweep_key

# Configurations per forward pass or beam search. On 2 CPU cores a MiniLM classifier sweep is
# bound by arithmetic (72 configurations of 256 NLI examples: 47.8 s one at a time, 46.9 s four
# per pass, 52.5 s twelve). Translation sweeps take 0: the decoder chooses from the device
# (``sweep_decoder.configs_per_pass_for``: 12 on a CPU, what a GPU's free memory holds). On a
# CPU both sweeps split their passes over two forked processes (helpers/sweeps/forked.py).
CLASSIFIER_CONFIGS_PER_PASS = 1
Removal = tuple[str, Sequence]  # (removal kind, reference examples): heads removed by mean or resample ablation
TRANSLATION_CONFIGS_PER_PASS = 0


def effect_rows(
    configs: Sequence[Config], base_stats, *, stats_of, score, bootstrap: Bootstrap = Bootstrap()
) -> pd.DataFrame:
    """One row per configuration: the masked ``score`` of its summed statistics (``stats_of(config)``,
    one row per example, paired with ``base_stats``), ``delta``, the paired bootstrap's ``p_value``
    and ``significant`` (``bootstrap``: its resamples drawn with its seed; p < its alpha), the
    interval ``delta_low`` to ``delta_high`` of two one-sided tests at alpha
    (``significance.equivalence_class`` places it against a margin), the score on the even-
    and the odd-numbered examples, and ``examples``: how many examples the row rests on. Fewer
    than the bootstrap's ``min_units`` examples raise ``significance.SampleTooSmall``."""
    require_units(len(base_stats), bootstrap.min_units)
    indices = resample_indices(len(base_stats), bootstrap.n_resamples, bootstrap.seed)
    base = score(base_stats.sum(0))
    resampled_base = resampled_sums(base_stats, indices)  # summed once for every configuration
    rows = []
    for config in configs:
        stats = stats_of(config)
        test = paired_bootstrap(
            base_stats, stats, score=score, indices=indices, alpha=bootstrap.alpha, resampled_a=resampled_base
        )
        kind, layer, heads = config
        rows.append(
            {
                "kind": kind,
                "layer": layer,
                "heads": list(heads),
                "head": heads[0] if len(heads) == 1 else None,
                "score": base + test.delta,
                "base": base,
                "delta": test.delta,
                "p_value": test.p_value,
                "significant": test.significant,
                "delta_low": test.low,
                "delta_high": test.high,
                # the same score on the even- and odd-numbered examples: two independent halves
                "score_even": score(stats[0::2].sum(0)),
                "score_odd": score(stats[1::2].sum(0)),
                "examples": len(base_stats),
            }
        )
    return pd.DataFrame(rows)


MEASURES = tuple(BY_KEY)  # the paper's metric (here accuracy), the likelihood: book/store/measures.py


def classifier_effects(
    model,
    tokenizer,
    *,
    examples: Sequence,
    configs: Sequence[Config],
    max_length: int = 64,
    batch_size: int = 64,
    bootstrap: Bootstrap = Bootstrap(),
    progress: bool = True,
    cache_dir: Path | None = None,
    configs_per_pass: int = CLASSIFIER_CONFIGS_PER_PASS,
    measure: str = "metric",
    removal: Removal | None = None,
    looks: Looks | None = None,
    positions: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Accuracy (or, with ``measure="likelihood"``, the mean log-probability of the gold
    label, in nats) of a sequence classifier under each configuration (lower layers replayed; up
    to ``configs_per_pass`` configurations of a layer in one forward pass, with the same results;
    a BERT classifier's last layer computed at its first token only, first_token_only.py).

    One sweep serves both measures: it keeps each example's label log-probabilities.
    ``cache_dir`` (e.g. ``course.sweeps_dir``; only for a model as loaded, never one modified in
    place) keeps them per configuration, so a later call on the same examples and options
    (either measure) computes only the configurations it has not seen. ``removal``: ``(kind,
    reference examples)`` to remove heads by mean or resample ablation (removal.py) instead of
    zeroing them; the reference set enters the cache key. ``looks``: evaluate in two looks
    (``two_look_rows``; a head stops early only when placed on both measures). ``positions``:
    score only the examples at these positions of ``examples``, their outputs read from the sweep
    over all of them (another chapter's, in the cache)."""
    if measure not in MEASURES:
        raise ValueError(f"unknown measure {measure!r}; use one of {MEASURES}")
    _one_of(looks, positions)
    gold = np.asarray([e.label for e in examples])

    def outputs(part: Sequence, wanted: Sequence[Config]) -> Callable[[Config], np.ndarray]:
        get = classifier_outputs(
            model,
            tokenizer,
            examples=part,
            configs=[c for c in wanted if c != UNMASKED],
            max_length=max_length,
            batch_size=batch_size,
            progress=progress,
            cache_dir=cache_dir,
            configs_per_pass=configs_per_pass,
            removal=removal,
        )
        return lambda c: np.asarray(get(c))

    measures = {
        "metric": SweepScore(
            lambda lp, at: accuracy_stats(np.argmax(lp, 1), gold[at]),
            accuracy_from_stats,
            looks.margin("classifier", "metric") if looks else 0.0,
        ),
        "likelihood": SweepScore(
            lambda lp, at: _gold_nll_stats(lp, gold[at]),
            log_likelihood,
            looks.margin("classifier", "likelihood") if looks else 0.0,
        ),
    }
    return _measured_rows(
        examples,
        configs,
        outputs=outputs,
        measures=list(measures.values()),
        chosen=list(measures).index(measure),
        looks=looks,
        positions=positions,
        bootstrap=bootstrap,
    )


def _one_of(looks, positions) -> None:
    if looks is not None and positions is not None:
        raise ValueError("two looks draw their own examples: give either looks or positions, not both")


def _measured_rows(
    examples: Sequence,
    configs: Sequence[Config],
    *,
    outputs: Callable[[Sequence, list], Callable],
    measures: Sequence[SweepScore],
    chosen: int,
    looks: Looks | None,
    positions: Sequence[int] | None,
    bootstrap: Bootstrap,
) -> pd.DataFrame:
    """``effect_rows`` of ``measures[chosen]``: in two looks (``looks``; a head stops early only when
    placed on every one of ``measures``), or in one over ``examples`` (those at ``positions`` only,
    read from the sweep over all of them). ``outputs(examples, configs)`` gives a getter of each
    configuration's per-example outputs."""
    if looks is not None:
        return looks.rows(examples, configs, outputs=outputs, measures=measures, bootstrap=bootstrap)[chosen]
    get, measure = outputs(examples, configs), measures[chosen]
    at = np.arange(len(examples)) if positions is None else np.asarray(positions)
    return effect_rows(
        configs,
        measure.stats(get(UNMASKED)[at], at),
        stats_of=lambda c: measure.stats(get(c)[at], at),
        score=measure.score,
        bootstrap=bootstrap,
    )


def classifier_outputs(
    model,
    tokenizer,
    *,
    examples: Sequence,
    configs: Sequence[Config],
    max_length: int = 64,
    batch_size: int = 64,
    progress: bool = True,
    cache_dir: Path | None = None,
    configs_per_pass: int = CLASSIFIER_CONFIGS_PER_PASS,
    removal: Removal | None = None,
) -> Callable[[Config], list]:
    """The sweep behind ``classifier_effects``: every label's log-probability ``[N, labels]`` per
    example under ``UNMASKED`` and each configuration, computed where the cache lacks them;
    returns the cache's getter."""
    inputs = [_text_of(e) for e in examples]
    options = {"max_length": max_length, "batch_size": batch_size, "by_length": True, "outputs": "log_probs"}
    if supports_first_token_only(model):
        options["first_token_only"] = True
    options.update(_removal_options(removal, _text_of))
    cache = _cache(cache_dir, inputs, options)
    everything = [UNMASKED, *configs]
    todo = cache.share(everything)
    what = "head configurations" if removal is None else f"head configurations, {removal[0]} removal"
    with (
        ledger.entry(
            "classifier scoring", what, model=model, examples=len(examples), configs=len(everything)
        ) as timed,
        cache.working(),
    ):
        timed.set_computed(len(todo))
        if todo:
            encoded = encode(tokenizer, examples, max_length)
            order = by_length(encoded)
            data = list(batches(encoded, batch_size, order))
            todo = [c for c in todo if c != UNMASKED]
            removed = _classifier_reference(model, tokenizer, removal, max_length)
            with first_token_only(model):
                base, outs = single_layer_sweep(
                    model,
                    data,
                    run=_label_log_probs,
                    configs=todo,
                    progress=progress,
                    configs_per_pass=configs_per_pass,
                    removal=removed,
                )
            cache.put(UNMASKED, in_order(base, order).tolist())
            for config, log_probs in outs.items():
                cache.put(config, in_order(log_probs, order).tolist())
    cache.wait_for(everything)
    return cache.get


def _removal_options(removal: Removal | None, text_of) -> dict:
    """The cache options of a removal: none for zero (the keys of earlier sweeps stay), else its
    kind and the reference examples' texts."""
    if removal is None or removal[0] == "zero":
        return {}
    kind, reference = removal
    return {"removal": kind, "reference": [text_of(e) for e in reference]}


def _classifier_reference(model, tokenizer, removal: Removal | None, max_length: int) -> HeadRemoval | None:
    """The ``HeadRemoval`` of ``removal`` (kind, reference examples) for a classifier, or None for zero."""
    if removal is None or removal[0] == "zero":
        return None
    kind, reference = removal
    one_each = [encode(tokenizer, [e], max_length) for e in reference]
    return reference_outputs(model, one_each, _label_log_probs, kind)


def _label_log_probs(model, batch) -> torch.Tensor:
    """[B, labels]: log-probabilities of every label (float32)."""
    return torch.log_softmax(model(**to_device(batch, model)).logits.float(), -1)


def _gold_nll_stats(log_probs: np.ndarray, gold: Sequence[int]) -> np.ndarray:
    """``[N, 2]`` rows (negative log-probability of the gold label, 1) from label log-probabilities
    ``[N, labels]``: ``log_likelihood`` of their sum is the mean gold log-probability."""
    nll = -np.asarray(log_probs, dtype=np.float64)[np.arange(len(gold)), np.asarray(gold)]
    return np.stack([nll, np.ones_like(nll)], 1)


def _text_of(example) -> list:
    return [example.premise, example.hypothesis] if hasattr(example, "premise") else [example.text, example.text_pair]


def _cache(cache_dir: Path | None, inputs: Sequence, options: dict) -> SweepCache:
    return SweepCache(None if cache_dir is None else Path(cache_dir) / sweep_key(inputs, options), len(inputs))


def translation_effects(
    model,
    pairs: Sequence,
    *,
    configs: Sequence[Config],
    beam: int = 5,
    batch_size: int = 64,
    bootstrap: Bootstrap = Bootstrap(),
    progress: bool = True,
    cache_dir: Path | None = None,
    max_len_b: int = translation_model.MAX_LEN_B,
    configs_per_pass: int = TRANSLATION_CONFIGS_PER_PASS,
    positions: Sequence[int] | None = None,
    max_len_a: float = translation_model.MAX_LEN_A,
    bleu: BleuDefinition = BleuDefinition(),
    looks: Looks | None = None,
    first_look: Sequence[int] | None = None,
    chosen_here: bool = False,
) -> pd.DataFrame:
    """BLEU (``bleu``) of a translation model under each configuration (beam search, stopping at
    ``max_len_a`` times the source length + ``max_len_b`` tokens; up to ``configs_per_pass``
    configurations per search, 0: as many as the device holds, with the same results);
    ``cache_dir`` as in ``classifier_effects`` (hypotheses per configuration, stored as each pass
    finishes); ``positions``: BLEU of the pairs at these
    positions only, their hypotheses read from the search over all of ``pairs``; ``looks``: two
    looks at ``pairs`` (``two_look_rows``; the first at the positions ``first_look`` when given):
    a configuration is decoded on the rest of them only when the first look leaves it undetermined
    against ``looks``' BLEU margin; ``chosen_here``: the configurations were chosen as the best on
    the first look's pairs, which lifts their scores there, so the first look stops only those
    it finds harmful (below -margin: what selection works against), and the rest go on. ``bleu``:
    the BLEU computed (``metrics.BleuDefinition``: tokenized by default, or detokenized against
    the raw references); the hypotheses cached are the model's outputs, whatever the definition."""
    _one_of(looks, positions)
    refs = bleu.references(pairs)
    sources = [p.src for p in pairs]
    options = {"beam": beam, "lenpen": 1.0, "batch_size": batch_size, "max_len_a": max_len_a, "max_len_b": max_len_b}
    search = dict(beam=beam, batch_size=batch_size, progress=progress, max_len_b=max_len_b, max_len_a=max_len_a)
    search.update(configs_per_pass=configs_per_pass)
    if looks is not None:
        cache_of = lambda part: _cache(cache_dir, part, options)  # one look's sources
        stops = _harmful_only if chosen_here else settled
        return _bleu_looks(
            model,
            pairs,
            configs=configs,
            looks=looks,
            bootstrap=bootstrap,
            cache_of=cache_of,
            search=search,
            first=first_look,
            stops=stops,
            definition=bleu,
        )
    base, outs = translation_sweep(
        model, sources, configs=configs, cache=_cache(cache_dir, sources, options), **search
    )
    at = range(len(pairs)) if positions is None else positions
    stats = lambda outputs: bleu_stats(bleu.hypotheses([outputs[i] for i in at]), [refs[i] for i in at], bleu.tokenize)
    return effect_rows(
        configs,
        stats(base),
        stats_of=lambda c: stats(outs[c]),
        score=lambda sums: bleu_from_stats(sums, bleu.tokenize),
        bootstrap=bootstrap,
    )


def _harmful_only(low: float, high: float, margin: float) -> bool:
    """A first look's stop for configurations chosen on its own examples: only an interval wholly
    below -``margin`` (the selection lifted the score, so a drop it still shows stands)."""
    return equivalence_class(low, high, margin) == "harmful"


def _bleu_looks(
    model,
    pairs: Sequence,
    *,
    configs: Sequence[Config],
    looks: Looks,
    bootstrap: Bootstrap,
    cache_of: Callable[[list[str]], SweepCache],
    search: dict,
    first: Sequence[int] | None = None,
    stops: Callable[[float, float, float], bool] = settled,
    definition: BleuDefinition = BleuDefinition(),
) -> pd.DataFrame:
    """``translation_effects`` in two looks: each look's sources decoded as one sweep (its own
    cache entry), BLEU's sentence statistics (of ``definition``) summed over the examples a row
    rests on."""
    refs = definition.references(pairs)

    def outputs(at: np.ndarray, wanted: list) -> dict:
        sources = [pairs[i].src for i in at]
        masked = [c for c in wanted if c != UNMASKED]
        base, outs = translation_sweep(model, sources, configs=masked, cache=cache_of(sources), **search)
        found = {c: np.array(outs[c], dtype=object) for c in masked}
        return {**found, UNMASKED: np.array(base, dtype=object)}

    bleu = SweepScore(
        lambda hyps, at: bleu_stats(definition.hypotheses(list(hyps)), [refs[i] for i in at], definition.tokenize),
        lambda sums: bleu_from_stats(sums, definition.tokenize),
        looks.margin("translation", "metric"),
    )
    (table,) = two_look_rows(
        len(pairs),
        list(configs),
        outputs=outputs,
        measures=[bleu],
        bootstrap=bootstrap,
        first_share=looks.first_share,
        first=first,
        stops=stops,
    )
    return table


def translation_likelihood_effects(
    model,
    pairs: Sequence,
    *,
    configs: Sequence[Config],
    max_tokens: int = 2000,
    bootstrap: Bootstrap = Bootstrap(),
    progress: bool = True,
    cache_dir: Path | None = None,
    removal: Removal | None = None,
    looks: Looks | None = None,
    positions: Sequence[int] | None = None,
) -> pd.DataFrame:
    """The mean log-likelihood per reference token (nats, teacher-forced, ``scorers.translation_nll``)
    of a translation model under each configuration (each masking heads of one layer), with the
    paired bootstrap over sentences; columns as ``translation_effects``'s. One teacher-forced pass
    per configuration that replays the layers below the masked one
    (``scorers.single_layer_translation_nll``), no decoding; ``cache_dir`` as in
    ``classifier_effects`` (each sentence's NLL and token count per configuration); ``removal``,
    ``looks`` and ``positions`` as in ``classifier_effects``."""

    def outputs(part: Sequence, wanted: Sequence[Config]) -> Callable[[Config], np.ndarray]:
        get = _translation_nll_outputs(
            model,
            part,
            configs=[c for c in wanted if c != UNMASKED],
            max_tokens=max_tokens,
            progress=progress,
            cache_dir=cache_dir,
            removal=removal,
        )
        return lambda c: np.asarray(get(c))

    _one_of(looks, positions)
    measure = SweepScore(
        lambda rows, at: rows, log_likelihood, looks.margin("translation", "likelihood") if looks else 0.0
    )
    return _measured_rows(
        pairs,
        configs,
        outputs=outputs,
        measures=[measure],
        chosen=0,
        looks=looks,
        positions=positions,
        bootstrap=bootstrap,
    )


def _translation_nll_outputs(
    model,
    pairs: Sequence,
    *,
    configs: Sequence[Config],
    max_tokens: int = 2000,
    progress: bool = True,
    cache_dir: Path | None = None,
    removal: Removal | None = None,
) -> Callable[[Config], list]:
    """The sweep behind ``translation_likelihood_effects``: each sentence's ``[NLL, tokens]`` under
    ``UNMASKED`` and each configuration, computed where the cache lacks them; returns the cache's getter."""
    options = {
        "measure": "teacher_forced_nll",
        "max_tokens": max_tokens,
        **_removal_options(removal, lambda p: [p.src, p.ref]),
    }
    cache = _cache(cache_dir, [[p.src, p.ref] for p in pairs], options)
    everything = [UNMASKED, *configs]
    todo = cache.share(everything)
    what = "head configurations" if removal is None else f"head configurations, {removal[0]} removal"
    with (
        ledger.entry(
            "teacher-forced scoring", what, model=model, examples=len(pairs), configs=len(everything)
        ) as timed,
        cache.working(),
    ):
        timed.set_computed(len(todo))
        removed = (
            None
            if not todo or not removal or removal[0] == "zero"
            else translation_reference(model, removal[1], removal[0])
        )
        for config, rows in single_layer_translation_nll(
            model, pairs, configs=todo, progress=progress, max_tokens=max_tokens, removal=removed
        ):
            cache.put(config, rows.tolist())
    cache.wait_for(everything)
    return cache.get


def translation_sweep(
    model,
    sources: Sequence[str],
    *,
    configs: Sequence[Config],
    beam: int = 5,
    lenpen: float = 1.0,
    batch_size: int = 64,
    progress: bool = True,
    cache: SweepCache | None = None,
    max_len_b: int = translation_model.MAX_LEN_B,
    configs_per_pass: int = TRANSLATION_CONFIGS_PER_PASS,
    max_len_a: float = translation_model.MAX_LEN_A,
) -> tuple[list[str], dict[Config, list[str]]]:
    """Translate ``sources`` unmasked and under every configuration (beam search, so no layer is
    replayed: the decoder runs once per output position; ``configs_per_pass`` configurations share
    one search, each on its own copy of the batch, and decoder-only passes share the encoder's
    output). Returns the unmasked hypotheses and
    ``{config: hypotheses}``. With a ``cache`` (made for exactly these sources and settings),
    configurations found there are not decoded again, and each new one is stored as it finishes;
    under torchrun each process decodes its share (``SweepCache.share``)."""
    cache = cache or SweepCache(None)
    everything = [UNMASKED, *configs]
    todo = cache.share(everything)  # what is missing; under torchrun, of this process's share

    with (
        ledger.entry(
            "decoding",
            f"head configurations, beam {beam}",
            model=model,
            examples=len(sources),
            configs=len(everything),
        ) as timed,
        cache.working(),
    ):
        timed.set_computed(len(todo))
        for config, hypotheses in masked_translations(
            model,
            sources,
            configs=todo,
            configs_per_pass=configs_per_pass,
            progress=progress,
            desc="translation sweep",
            beam=beam,
            lenpen=lenpen,
            batch_size=batch_size,
            max_len_b=max_len_b,
            max_len_a=max_len_a,
        ):
            cache.put(config, hypotheses)
    cache.wait_for(everything)
    return cache.get(UNMASKED), {c: cache.get(c) for c in configs}


def _cells(part: pd.DataFrame, scale: float, digits: int) -> list[str]:
    return [f"{d * scale:+.{digits}f}" + ("*" if s else "") for d, s in zip(part["delta"], part["significant"])]


def grid(df: pd.DataFrame, kind: str, scale: float = 1.0, digits: int = 2) -> pd.DataFrame:
    """Layers x heads table of ``delta * scale`` for ``kind`` (1-based), ``*`` where significant."""
    part = df[df["kind"] == kind]
    table = part.assign(cell=_cells(part, scale, digits)).pivot(index="layer", columns="head", values="cell")
    table.index = [f"layer {shown(i)}" for i in table.index]
    table.columns = [shown(h) for h in table.columns]
    return table


def sample_columns(part: pd.DataFrame) -> dict:
    """What rows rest on: ``examples``, the most any row rests on, and, where some rows stopped
    at the first look (``two_look_rows``), ``first_look_rows`` and ``first_look_examples``, the
    rows and the examples each of those rests on; None where the rows record no sample."""
    if "examples" not in part:
        return {"examples": None, "first_look_rows": None, "first_look_examples": None}
    early = part[part["look"] == 1] if "look" in part else part.iloc[:0]
    return {
        "examples": int(part["examples"].max()),
        "first_look_rows": len(early),
        "first_look_examples": int(early["examples"].min()) if len(early) else None,
    }


def significance_counts(effects: pd.DataFrame) -> pd.DataFrame:
    """One row per attention kind of ONE model's one-head ``effects`` (in their order of
    appearance): ``heads``, ``layers``, ``significant`` (p < alpha), ``significant_up`` (significant and
    delta > 0: removing the head improves the score), ``largest_drop`` and ``largest_gain``
    (min and max delta, in the score's unit); where the effects have them, ``examples`` (the
    most any row rests on; ``sample_columns``) and ``resolution``: the median half-width of the heads' intervals, in
    the score's unit, about the change a head must make to be called significant half of the
    time (the test's power at this sample). Count each model on its own and concatenate the
    results: every count is taken inside one kind's rows, so no model's rows can reach another's."""
    rows = []
    for kind, part in effects.groupby("kind", sort=False):
        significant = part["significant"].astype(bool).to_numpy()
        delta = part["delta"].to_numpy(float)
        rows.append(
            {
                "kind": kind,
                "heads": len(part),
                "layers": part["layer"].nunique(),
                "significant": int(significant.sum()),
                "significant_up": int((significant & (delta > 0)).sum()),
                "largest_drop": float(delta.min()),
                "largest_gain": float(delta.max()),
                **sample_columns(part),
                "resolution": resolution(part),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "kind",
            "heads",
            "layers",
            "significant",
            "significant_up",
            "largest_drop",
            "largest_gain",
            "examples",
            "first_look_rows",
            "first_look_examples",
            "resolution",
        ],
    )


def resolution(effects: pd.DataFrame) -> float:
    """The median half-width ``(delta_high - delta_low) / 2`` of the heads' intervals (score
    units): a change about this large is called significant half of the time; nan without intervals."""
    if not {"delta_low", "delta_high"} <= set(effects.columns) or effects.empty:
        return float("nan")
    return float(((effects["delta_high"].astype(float) - effects["delta_low"].astype(float)) / 2).median())


# ---- §3.3: keeping one head per layer ----------------------------------------------------------
def kept_head(heads: Sequence[int]) -> int:
    """The head an all-but-one configuration keeps: the index in 0..len(heads) it does not mask."""
    (kept,) = set(range(len(heads) + 1)) - set(heads)
    return kept


def best_per_layer(effects: pd.DataFrame) -> pd.DataFrame:
    """One row per (kind, layer) of all-but-one ``effects``: the kept head with the highest
    score (ties: the lowest head), as in Tables 2 and 3; adds the column ``kept`` (0-based).

    Like is compared with like: where a layer's rows rest on different looks (``two_look_rows``:
    some on the first share of the examples, some on all), the heads are ranked by their change
    on the first look's examples (``first_look_delta``), which every row has on the same examples;
    ranked on their own rows, a half-sample row's noisier change would win more often than its
    share (68% of picks in a simulation with equal true changes). The row reported is the chosen
    head's own."""
    df = effects.assign(kept=[kept_head(h) for h in effects["heads"]], _order=effects["kind"].map(_kind_order))
    df["_rank"] = df["delta"]
    if {"look", "first_look_delta"} <= set(df.columns):
        mixed = df.groupby(["kind", "layer"])["look"].transform("nunique") > 1
        df.loc[mixed, "_rank"] = df.loc[mixed, "first_look_delta"]
    df = df.sort_values(["_order", "layer", "_rank", "kept"], ascending=[True, True, False, True], kind="stable")
    return df.groupby(["kind", "layer"], sort=False).head(1).drop(columns=["_order", "_rank"]).reset_index(drop=True)


def _kind_order(kind: str) -> int:
    """The library's order of attention kinds (self; enc_self, enc_dec, dec_self, the paper's), then any other."""
    order = ENCODER_ONLY_KINDS + SEQ2SEQ_KINDS
    return order.index(kind) if kind in order else len(order)


def configs_of(rows: pd.DataFrame) -> list[Config]:
    """The configurations of ``rows`` (e.g. the heads ``best_per_layer`` chose), to evaluate elsewhere."""
    return [
        (k, int(layer), tuple(int(h) for h in heads))
        for k, layer, heads in zip(rows["kind"], rows["layer"], rows["heads"])
    ]


def held_out(chosen: pd.DataFrame, report: pd.DataFrame) -> pd.DataFrame:
    """Appendix A: the rows of ``report`` (effects on another set) for the configurations in
    ``chosen`` (``best_per_layer`` of the selection set), one per (kind, layer), with ``kept``."""
    wanted = set(configs_of(chosen))
    rows = report[[c in wanted for c in configs_of(report)]]
    if len(rows) != len(wanted):
        raise ValueError(
            f"the report set has {len(rows)} of the {len(wanted)} chosen configurations; "
            "evaluate configs_of(chosen) on it first"
        )
    rows = rows.assign(kept=[kept_head(h) for h in rows["heads"]], _order=rows["kind"].map(_kind_order))
    return rows.sort_values(["_order", "layer"]).drop(columns="_order").reset_index(drop=True)


def layer_table(rows: pd.DataFrame, scale: float = 1.0, digits: int = 2) -> pd.DataFrame:
    """Layers x kinds table of ``delta * scale``, ``*`` where significant; the index is the
    1-based layer, so tables of models with different depths line up with ``pd.concat``."""
    table = rows.assign(cell=_cells(rows, scale, digits)).pivot(index="layer", columns="kind", values="cell")
    table.index = pd.Index([shown(i) for i in table.index], name="layer")
    return table[sorted(table.columns, key=_kind_order)]


# ---- §3.4: the same heads on two domains -------------------------------------------------------
def paired_scores(in_domain: pd.DataFrame, out_of_domain: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration evaluated on both sets: ``kind``, ``layer``, ``head``, and
    ``score_in``/``score_out``, ``delta_in``/``delta_out`` (Figure 2's points), with each set's
    split halves ``score_even_in``, ``score_odd_in``, ``score_even_out``, ``score_odd_out`` when
    both tables have them (the effects functions above always do)."""
    halves = ["score_even", "score_odd"]
    measured = ["score", "delta"] + [c for c in halves if c in in_domain and c in out_of_domain]

    def keyed(df, side):
        out = df.assign(key=configs_of(df))[["key", "kind", "layer", "head", *measured]]
        return out.rename(columns={c: f"{c}_{side}" for c in measured})

    both = keyed(in_domain, "in").merge(keyed(out_of_domain, "out").drop(columns=["kind", "layer", "head"]), on="key")
    if len(both) != len(in_domain) or len(both) != len(out_of_domain):
        raise ValueError(
            f"the two sets share {len(both)} configurations, but have {len(in_domain)} and "
            f"{len(out_of_domain)}; evaluate the same configurations on both"
        )
    return both.drop(columns="key")


def correlation(paired: pd.DataFrame, x: str = "score_in", y: str = "score_out") -> tuple[float, float]:
    """Pearson r between columns ``x`` and ``y`` (by default in- and out-of-domain scores), and
    its two-sided p-value; (nan, nan) when either side does not vary (r is undefined).

    ``correlation(effects, "score_even", "score_odd")`` is the split-half agreement of one set:
    how far the scores after masking are a property of the heads rather than of the sample. A
    cross-domain r cannot be expected to exceed it much."""
    from scipy.stats import pearsonr

    a, b = paired[x].to_numpy(float), paired[y].to_numpy(float)
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return float("nan"), float("nan")
    result = pearsonr(a, b)
    return float(result.statistic), float(result.pvalue)


# ---- stop when decided: two looks at the examples (helpers/sweeps/sequential.py) -----------------
@dataclass(frozen=True)
class SweepScore:
    """One score of a sweep's per-example outputs: ``stats(outputs, positions)`` (``[N, k]``
    statistics of the ``[N, ...]`` outputs of the examples at ``positions``, e.g. to pair them with
    their gold labels), ``score`` of their sums, and the equivalence margin δ in its unit."""

    stats: Callable[[np.ndarray, np.ndarray], np.ndarray]
    score: Callable[[np.ndarray], float]
    margin: float


@dataclass(frozen=True)
class Looks:
    """Two looks at the examples (``two_look_rows``): ``first_share`` of them first; a head stops
    there when it is placed against the chapter's ``margins`` (``equivalence.DEFAULT_MARGINS``'
    keys: BLEU, accuracy, perplexity) on every measure its sweep serves."""

    margins: Mapping[str, float]
    first_share: float = 0.5

    def margin(self, track: str, measure: str) -> float:
        """δ of ``measure`` for a ``track`` ("classifier", "translation") in its effects' unit."""
        from .equivalence import margin

        return margin(track, measure, self.margins)

    def rows(
        self,
        examples: Sequence,
        configs: Sequence[Config],
        *,
        outputs: Callable[[Sequence, list], Callable],
        measures: Sequence[SweepScore],
        bootstrap: Bootstrap,
    ) -> list[pd.DataFrame]:
        """``two_look_rows`` over ``examples``, ``outputs(examples of a look, configs)`` giving a
        getter of each configuration's per-example outputs."""

        def at(positions: np.ndarray, wanted: list) -> dict:
            get = outputs([examples[i] for i in positions], wanted)
            return {c: get(c) for c in wanted}

        return two_look_rows(
            len(examples), configs, outputs=at, measures=measures, bootstrap=bootstrap, first_share=self.first_share
        )


def two_look_rows(
    n: int,
    configs: Sequence[Config],
    *,
    outputs: Callable[[np.ndarray, list[Config]], dict],
    measures: Sequence[SweepScore],
    bootstrap: Bootstrap,
    first_share: float = 0.5,
    first: Sequence[int] | None = None,
    stops: Callable[[float, float, float], bool] = settled,
) -> list[pd.DataFrame]:
    """``effect_rows`` of every measure, each head evaluated in two looks (``sequential``): all of
    ``configs`` on ``first_share`` of the ``n`` examples (drawn with the bootstrap's seed; or at the
    sorted positions ``first``, given: a subset already swept, read from its cache; ``stops(low,
    high, margin)`` says which first-look intervals stop there, every placed one by default), then those
    not yet placed against every measure's margin on all of them, each look testing at alpha / 2.
    ``outputs(positions, configs)``: ``{config: [len(positions), ...] per-example outputs}`` for
    those example positions, ``UNMASKED`` included. Returns one table per measure, in
    ``configs``' order, with ``look`` (1 or 2), ``examples`` (what the row rests on) and
    ``first_look_delta`` (every row's change on the first look's examples: ``best_per_layer``
    compares rows of different looks on it); a row
    of look 1 has the unmasked model's score on all the examples as its ``base`` and its change
    added to it as its ``score``. Each look's bootstrap needs its ``min_units`` examples."""
    if first is None:
        first, rest = look_split(n, first_share, bootstrap.seed)
    else:
        first = np.asarray(first, dtype=int)
        rest = np.setdiff1d(np.arange(n), first)
    level = bootstrap.at(look_alpha(bootstrap.alpha))
    early = outputs(first, [UNMASKED, *configs])
    looked = [
        effect_rows(
            configs,
            m.stats(early[UNMASKED], first),
            stats_of=lambda c, m=m: m.stats(early[c], first),
            score=m.score,
            bootstrap=level,
        )
        for m in measures
    ]
    placed = [
        all(stops(t["delta_low"][i], t["delta_high"][i], m.margin) for t, m in zip(looked, measures))
        for i in range(len(configs))
    ]
    later_configs = [c for c, done in zip(configs, placed) if not done]
    late = outputs(rest, [UNMASKED, *later_configs])

    def whole(config):
        out = np.empty((n, *np.shape(early[config])[1:]), dtype=np.asarray(early[config]).dtype)
        out[first], out[rest] = early[config], late[config]
        return out

    full = {c: whole(c) for c in [UNMASKED, *later_configs]}
    every = np.arange(n)
    tables = []
    for m, early_rows in zip(measures, looked):
        base_stats = m.stats(full[UNMASKED], every)
        late_rows = effect_rows(
            later_configs, base_stats, stats_of=lambda c, m=m: m.stats(full[c], every), score=m.score, bootstrap=level
        ).assign(look=2, examples=n)
        late_rows["first_look_delta"] = early_rows["delta"].to_numpy()[
            [i for i, done in enumerate(placed) if not done]
        ]
        base = m.score(base_stats.sum(0))
        early_rows = early_rows.assign(
            score=base + early_rows["delta"],
            base=base,
            look=1,
            examples=len(first),
            first_look_delta=early_rows["delta"],
        )
        later = iter(range(len(late_rows)))
        tables.append(
            pd.concat(
                [early_rows.iloc[[i]] if done else late_rows.iloc[[next(later)]] for i, done in enumerate(placed)],
                ignore_index=True,
            )
        )
    return tables


def looks_line(named: Sequence[tuple[str, pd.DataFrame]]) -> str:
    """One sentence on which rows of each effects table stopped at the first look, or that every
    row took one look (tables without a ``look`` column)."""

    def part(name: str, t: pd.DataFrame) -> str:
        early, late = t[t["look"] == 1], t[t["look"] == 2]
        text = f"{name}: {len(early)} of {int(t['look'].notna().sum())} rows stopped at the first look"
        text += f" (on {int(early['examples'].iloc[0])} examples)" if len(early) else ""
        return text + (f", {len(late)} went on to all {int(late['examples'].iloc[0])}" if len(late) else "")

    parts = [part(name, t) for name, t in named if "look" in t]
    return (
        "Stop when decided (two looks at alpha/2 each): " + "; ".join(parts) + "."
        if parts
        else "Every row rests on all the examples (one look)."
    )
