"""Chapter 12's claims: chapter 03's verdicts (few heads matter alone, most are negligible alone)
under every way of removing a head (zero, mean, resample). The rules are chapter 03's, read on
``12_removal_counts`` one removal kind at a time (``verdicts_by_removal``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .. import samples
from ..engine import (
    CANNOT_TELL,
    MEASURES,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    Claim,
    MissingResults,
    Results,
    per_seed,
    present,
    results_folder,
    three_way,
)
from . import ch03

CHAPTER = "12_unimportant_or_unmeasured"
COUNTS = "12_removal_counts"
REMOVAL_RULES = {"few_significant": ch03.few_significant, "most_negligible": ch03.most_negligible}


class OneRemoval(Results):
    """``r`` as chapter 03's tables would read if heads were removed by ``removal`` (zero, mean or
    resample): ``03_one_head_counts`` is chapter 12's ``12_removal_counts`` rows of that kind."""

    def __init__(self, r: Results, removal: str):
        super().__init__(r.folder, r.training_seed, r.measure, r.params)
        self.removal = removal

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name != ch03.COUNTS:
            return super().__getitem__(name)
        table = super().__getitem__(COUNTS)
        return present(table[table["removal"] == self.removal], f"{COUNTS}: {self.removal}")


def every_removal(check: Callable[[Results], tuple[str, str]]) -> Callable[[Results], tuple[str, str]]:
    """Chapter 03's ``check`` applied to the counts of each way of removing a head: reproduced
    when it is reproduced under every one, partly when under some (or partly under any); where it
    holds under none, not reproduced if any kind refutes it (the others' "cannot tell" does not
    hide a refutation), else cannot tell."""

    def judged(r: Results) -> tuple[str, str]:
        found = {kind: check(OneRemoval(r, kind)) for kind in dict.fromkeys(r[COUNTS]["removal"])}
        verdicts = [v for _, v in found.values()]
        text = "; ".join(f"{kind}: {t} ({v})" for kind, (t, v) in found.items())
        if any(v in (REPRODUCED, PARTLY) for v in verdicts):
            return text, three_way(all(v == REPRODUCED for v in verdicts), True)
        return text, NOT_REPRODUCED if NOT_REPRODUCED in verdicts else CANNOT_TELL

    return judged


def every_removal_statistic(statistic):
    """Chapter 03's between-seed ``statistic`` under each way of removing a head, one component
    per removal kind and model."""

    def per_kind(r: Results) -> dict:
        return {
            f"{kind}, {name}": value
            for kind in dict.fromkeys(r[COUNTS]["removal"])
            for name, value in statistic(OneRemoval(r, kind)).items()
        }

    return per_kind


def verdicts_by_removal(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """Chapter 03's two rules under each way of removing a head, one row per rule, measure, training
    seed and removal kind (zero, mean, resample), from ``12_removal_counts``: which verdicts change
    with the kind. Columns: key, measure, training_seed, removal, ours, verdict."""
    folder = results_folder(profile, results_root)
    rows = []
    for measure, name in MEASURES.items():
        results = Results(folder, measure=measure)
        try:
            kinds = list(dict.fromkeys(results[COUNTS]["removal"]))
        except MissingResults:
            continue
        for key, check in REMOVAL_RULES.items():
            for kind in kinds:
                try:
                    found = per_seed(CHAPTER, lambda r, check=check, kind=kind: check(OneRemoval(r, kind)), results)
                except MissingResults:  # no seed with every model (a profile that trains none)
                    continue
                rows += [
                    {
                        "key": key,
                        "measure": name,
                        "training_seed": seed,
                        "removal": kind,
                        "ours": text,
                        "verdict": verdict,
                    }
                    for seed, (text, verdict) in found.items()
                ]
    return pd.DataFrame(rows, columns=["key", "measure", "training_seed", "removal", "ours", "verdict"])


def removal_table(profile: str, results_root: Path | None = None) -> pd.DataFrame:
    """``verdicts_by_removal`` laid out to read: one row per rule, measure and training seed, one verdict
    column per removal kind."""
    table = verdicts_by_removal(profile, results_root)
    if table.empty:
        return table
    kinds = list(dict.fromkeys(table["removal"]))
    return table.pivot_table(
        index=["key", "measure", "training_seed"], columns="removal", values="verdict", aggfunc="first"
    )[kinds]


def counts_sample(r: Results) -> str:
    return samples.one_head(r[COUNTS])


CLAIMS = [
    Claim(
        "few_significant_every_removal",
        "§3.2, Table 1",
        "Few heads matter alone, whether a head is zeroed, replaced by its mean or by its output on another example",
        "masking (zero) only",
        f"reproduced: chapter 03's rule (under {ch03.FEW_SHARE:.0%} significant in every model) holds under every "
        "way of "
        "removing a head; partly: under some",
        CHAPTER,
        every_removal(ch03.few_significant),
        likelihood=True,
        sample=counts_sample,
        seed_statistic=every_removal_statistic(ch03.shares_of("significant", "unplaced")),
    ),
    Claim(
        "most_negligible_every_removal",
        "§3.2, Table 1",
        "Most heads are shown negligible alone, whichever way a head is removed",
        "8 of 96 significant, masking only (the paper tests no equivalence)",
        f"reproduced: chapter 03's rule (over {1 - ch03.FEW_SHARE:.0%} negligible in every model) holds under every "
        "way of "
        "removing a head; partly: under some",
        CHAPTER,
        every_removal(ch03.most_negligible),
        likelihood=True,
        sample=counts_sample,
        seed_statistic=every_removal_statistic(ch03.shares_of("negligible", "undetermined")),
    ),
]
