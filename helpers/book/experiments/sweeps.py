"""One chapter's head-mask sweeps, repeated on every training run of a model.

    sweeps = HeadSweeps(settings, training_seeds=0, decoded_examples=200, beam=1, max_len_a=1.0, max_len_b=24,
                        bootstrap=Bootstrap(n_resamples=1000, alpha=0.01, seed=0))
    effects = sweeps.effects("nli", examples, configs="one_head")  # every seed, accuracy
    effects = sweeps.effects("translation", pairs, configs="one_head", measure="likelihood")  # nats per token

A sweep masks each configuration (``"one_head"``: every head alone; ``"all_but_one"``: every
layer down to one head; a function of the model; or a list of configurations) and scores it on one of two measures:
``"metric"``, the paper's (a classifier's accuracy; a translation model's BLEU on the first
``decoded_examples`` pairs drawn at random, decoded with ``beam``), or ``"likelihood"`` (the
gold label's log-probability; the reference's log-likelihood per token on every pair), with the
paired bootstrap. Results are cached per model run (``course.sweeps_dir``), so every chapter
that asks for the same sweep reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from ...heads.metrics import TOKENIZED, BleuDefinition
from ...heads.significance import Bootstrap  # noqa: F401 (the chapters take it here, beside HeadSweeps)
from ...sweeps.ablation import Config, all_but_one_configs, one_head_configs
from .. import course
from ..profiles import Profile
from .head_effects import (
    MEASURES,
    Looks,
    Removal,
    classifier_effects,
    translation_effects,
    translation_likelihood_effects,
)

_CONFIGS: dict[str, Callable] = {"one_head": one_head_configs, "all_but_one": all_but_one_configs}
# a name in CONFIGS, a function of the model, or a list
_Configs = str | Callable[..., Sequence[Config]] | Sequence[Config]


@dataclass(frozen=True)
class Run:
    """One trained model of one training seed, loaded, with the chapter's sweep settings."""

    sweeps: HeadSweeps
    name: str  # the model's name in the profile, e.g. "nli"
    run_name: str  # its training run's name, e.g. "nli@1"
    seed: int
    model: object
    tokenizer: object = None

    def effects(
        self,
        examples: Sequence,
        configs: _Configs,
        *,
        measure: str = "metric",
        removal: Removal | None = None,
        positions: Sequence[int] | None = None,
    ) -> pd.DataFrame:
        """One row per configuration (``head_effects``' columns) of this run on ``examples`` (on
        those at ``positions`` only, their outputs read from the sweep over all of ``examples``;
        for BLEU, positions in the pairs the sweep decodes, ``HeadSweeps.decoded(examples)``)."""
        return self.sweeps.run_effects(
            self, examples, configs=configs, measure=measure, removal=removal, positions=positions
        )


@dataclass(frozen=True)
class HeadSweeps:
    """The sweep settings of one chapter (its parameters) on one profile's models."""

    settings: Profile
    training_seeds: int = 0  # how many training runs (0: every seed the profile trains)
    decoded_examples: int = 0  # translation pairs decoded for BLEU (0: all)
    beam: int = 5
    max_len_b: int = 200
    max_len_a: float = 0.0  # decoding stops at max_len_a * source length + max_len_b tokens (fairseq's rule)
    bleu: str = TOKENIZED  # the BLEU of the sweeps (``metrics.BleuDefinition``): tokenized or detokenized
    # beam searches in one pass, each under its own configuration (0: from the device,
    # ``sweep_decoder.configs_per_pass_for``; the results do not depend on it)
    decoding_configs_per_pass: int = 0
    bootstrap: Bootstrap = Bootstrap()  # the paired bootstrap's settings (its seed also draws the examples)
    progress: bool = True
    looks: Looks | None = None  # two looks at the examples (stop when decided) for the classifier and
    # likelihood sweeps; BLEU sweeps take one look. None: one look

    def is_translation(self, name: str) -> bool:
        return self.settings.model(name)["task"] == "translation"

    def data(self, name: str) -> dict[str, list]:
        """The splits model ``name`` was trained and is tested on."""
        return course.load_data(self.settings, name)

    def bleu_definition(self, name: str) -> BleuDefinition:
        """The BLEU these sweeps compute for translation model ``name`` (its target language)."""
        from ...zoo.recipes import target_language

        return BleuDefinition(self.bleu, target_language(self.settings.model(name)))

    def decoded(self, pairs: Sequence) -> list:
        """The pairs the BLEU sweeps decode: ``decoded_examples`` of them drawn at random."""
        return course.subset(pairs, self.decoded_examples)

    def runs(self, name: str):
        """Each training run of model ``name``, loaded (a ``Run``), in seed order."""
        for seed, run in course.seed_runs(self.settings, name, self.training_seeds):
            if self.is_translation(name):
                yield Run(self, name, run, seed, course.load_translation(self.settings, run))
            else:
                yield Run(self, name, run, seed, *course.load_classifier(self.settings, run))

    def over_runs(self, name: str, measure: Callable[[Run], pd.DataFrame]) -> pd.DataFrame:
        """``measure(run)`` for every training run of ``name``, stacked, with ``training_seed``."""
        return pd.concat([measure(run).assign(training_seed=run.seed) for run in self.runs(name)], ignore_index=True)

    def effects(
        self,
        name: str,
        examples: Sequence,
        *,
        configs: _Configs,
        measure: str = "metric",
        removal: Removal | None = None,
        positions: Sequence[int] | None = None,
    ) -> pd.DataFrame:
        """``Run.effects`` on every training run of ``name``, stacked with ``training_seed``.
        ``removal``: ``(kind, reference examples)`` to remove heads by mean or resample ablation
        (helpers/heads/removal.py) instead of zeroing them; ``positions``: as ``Run.effects``'s."""
        return self.over_runs(
            name, lambda run: run.effects(examples, configs, measure=measure, removal=removal, positions=positions)
        )

    def bleu_in_looks(
        self, run: Run, pairs: Sequence, configs: Sequence[Config], chosen_here: bool = False
    ) -> pd.DataFrame:
        """BLEU effects of ``configs`` in two looks over all of ``pairs`` (not only the
        ``decoded_examples`` of them): every configuration on the pairs ``decoded`` draws (the
        sweeps' own subset, so its decodes come from the cache), those it leaves undetermined
        against the BLEU margin on all of them, each look at alpha / 2
        (``head_effects.two_look_rows``); where the subset is every pair, one look at alpha. For
        the few configurations a chapter reports, where one look on the decoded subset cannot
        place them; ``chosen_here``: they were chosen on that subset
        (``head_effects.translation_effects``). The ValueError says when ``looks`` is None."""
        if self.looks is None:
            raise ValueError("bleu_in_looks needs the sweeps' looks (stop_when_decided): none are set")
        first = course.subset_positions(len(pairs), self.decoded_examples)
        if len(first) == len(pairs):  # every pair decoded already: nothing more to look at, one look at alpha
            return self.run_effects(run, pairs, configs=list(configs), measure="metric")
        return translation_effects(
            run.model,
            pairs,
            configs=list(configs),
            beam=self.beam,
            max_len_b=self.max_len_b,
            max_len_a=self.max_len_a,
            looks=self.looks,
            first_look=first,
            chosen_here=chosen_here,
            bleu=self.bleu_definition(run.name),
            configs_per_pass=self.decoding_configs_per_pass,
            cache_dir=course.sweeps_dir(self.settings, run.run_name),
            progress=self.progress,
            bootstrap=self.bootstrap,
        )

    def label_log_probs(self, run: Run, examples: Sequence, configs: Sequence[Config]) -> Callable[[Config], list]:
        """A classifier's every label log-probability ``[N, labels]`` per example of ``examples``
        under ``UNMASKED`` and each of ``configs``: the outputs its effects are scored from, read
        from (or added to) the same sweep cache as ``run_effects``."""
        from .head_effects import classifier_outputs

        if self.is_translation(run.name):
            raise ValueError(f"{run.name} is a translation model: label log-probabilities are a classifier's")
        return classifier_outputs(
            run.model,
            run.tokenizer,
            examples=examples,
            configs=list(configs),
            max_length=self.settings.max_length(run.name),
            progress=self.progress,
            cache_dir=course.sweeps_dir(self.settings, run.run_name),
        )

    def run_effects(
        self,
        run: Run,
        examples: Sequence,
        *,
        configs: _Configs,
        measure: str,
        removal: Removal | None = None,
        positions: Sequence[int] | None = None,
    ) -> pd.DataFrame:
        if measure not in MEASURES:
            raise ValueError(f"measure {measure!r}: use one of {MEASURES}")
        zeroed = removal is None or removal[0] == "zero"
        if not zeroed and self.is_translation(run.name) and measure == "metric":
            raise ValueError(
                f"{removal[0]} ablation replaces a head's output position by position, which beam "
                "search (one position per step) cannot do: score the translation model by likelihood"
            )
        chosen = (
            _CONFIGS[configs](run.model)
            if isinstance(configs, str)
            else configs(run.model)
            if callable(configs)
            else list(configs)
        )
        common = {
            "cache_dir": course.sweeps_dir(self.settings, run.run_name),
            "progress": self.progress,
            "bootstrap": self.bootstrap,
        }
        if not self.is_translation(run.name):
            max_length = self.settings.max_length(run.name)
            return classifier_effects(
                run.model,
                run.tokenizer,
                examples=examples,
                configs=chosen,
                max_length=max_length,
                measure=measure,
                removal=removal,
                looks=self.looks,
                positions=positions,
                **common,
            )
        if measure == "likelihood":
            return translation_likelihood_effects(
                run.model, examples, configs=chosen, removal=removal, looks=self.looks, positions=positions, **common
            )
        return translation_effects(
            run.model,
            self.decoded(examples),
            configs=chosen,
            beam=self.beam,
            max_len_b=self.max_len_b,
            max_len_a=self.max_len_a,
            positions=positions,
            bleu=self.bleu_definition(run.name),
            configs_per_pass=self.decoding_configs_per_pass,
            **common,
        )  # positions: of the decoded pairs
