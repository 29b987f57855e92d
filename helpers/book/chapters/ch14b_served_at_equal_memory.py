"""Chapter 14b, served at equal memory: its experiment, the rules that judge its claims and its findings in words.

Chapter 14b: SmolLM2 served by llama.cpp at equal memory. Each setup is a GGUF file (weights
in f16, ``q8_0`` or ``q4_0``; KV groups removed by I_h or not) run with a KV cache type (keys and
values apart; llama.cpp's rotation allowed or not), all on one axis: the bytes llama.cpp
allocates for the weights and the cache. Quality is read as llama.cpp's perplexity tool reads it:
texts of ``text_tokens`` tokens (its default context, 512), the later half scored (its tool
scores 255 of 512 after a BOS token; SmolLM2 adds none, and here the 256 tokens of the later half
are scored), perplexity and the KL divergence from the 16-bit reference over the whole
vocabulary (its terms summed in float32: about 1e-6 nats of rounding, against 2e-4 for the
smallest KL a text gives here).

    files = export_files(models, SETUPS, folder, tokenizer_gguf)      # one GGUF per (removed, weights)
    with Served(files, SETUPS, cells=512, threads=2) as served:
        scores = served.scores(texts)                                 # one row per setup and text
        speed = served.speed(prompt, new_tokens=32, threads=[2], repeats=3)
    memory = memory_table(files, SETUPS, cells=[2048, 8192])          # llama.cpp beside the arithmetic
    quality = quality_table(scores, n_resamples=10_000)               # perplexity change [98%], KL

Every setup reads each text in turn, so the reference's distribution over the vocabulary is
compared while it is in memory and never stored.

Chapter 14b's claims, beyond the paper, as llama.cpp serves SmolLM2: a ``q8_0`` KV cache costs
under 1% perplexity; at equal memory, quantizing beats removing KV groups (on the total bytes,
and on the cache's bytes as chapter 14 ranks them); rotating before a ``q4_0`` cache lowers its
cost; keys are more sensitive to quantization than values. The rules read ``14b_quality``,
``14b_pairs`` and ``14b_contrasts`` (``chapters/ch14b_served_at_equal_memory.py``).

``findings``: chapter 14b's "What this run shows" paragraphs: SmolLM2 served by llama.cpp at
equal memory.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ...heads.significance import resample_indices
from ...serving.gguf_export import GgufExport, export_gguf
from ...serving.llama_api import MIB, Cache, LlamaApiError, LlamaModel, predicted_cache_bytes
from ..store.results import ChapterTables
from ..verdicts.engine import CANNOT_TELL, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, Results, present
from ..verdicts.text import words

REFERENCE = "reference"
LEVEL = 0.98  # every interval of the chapter: a paired bootstrap over texts
Q8, Q4 = Cache("q8_0", "q8_0"), Cache("q4_0", "q4_0")


@dataclass(frozen=True)
class _Setup:
    """One way to serve the model: ``removed``, the share of KV groups removed by I_h;
    ``weights``, the weight matrices' type; ``cache``, the KV cache's types and rotation."""

    name: str
    removed: float = 0.0
    weights: str = "f16"
    cache: Cache = field(default_factory=Cache)

    @property
    def file(self) -> tuple[float, str]:
        return self.removed, self.weights

    @property
    def family(self) -> str:
        """``reference``, ``removal`` (KV groups removed) or ``quantized`` (only quantized)."""
        if self.removed > 0:
            return "removal"
        return REFERENCE if self.weights == "f16" and self.cache == Cache() else "quantized"


SETUPS = (
    _Setup(REFERENCE),
    _Setup("q8_0 cache", cache=Q8),
    _Setup("q4_0 cache", cache=Q4),
    _Setup("q4_0 cache without rotation", cache=Cache("q4_0", "q4_0", rotation=False)),
    _Setup("q8_0 keys + q4_0 values", cache=Cache("q8_0", "q4_0")),
    _Setup("q4_0 keys + q8_0 values", cache=Cache("q4_0", "q8_0")),
    _Setup("1/3 KV groups removed", removed=1 / 3),
    _Setup("2/3 KV groups removed", removed=2 / 3),
    _Setup("Q8_0 weights", weights="q8_0"),
    _Setup("Q4_0 weights", weights="q4_0"),
    _Setup("Q8_0 weights + q8_0 cache", weights="q8_0", cache=Q8),
    _Setup("Q4_0 weights + q8_0 cache", weights="q4_0", cache=Q8),
)
# combinations of removal with quantization, read where time allows (the ``extra_setups`` parameter):
# on the course build the first was never near the frontier, and each costs a twelfth more time
EXTRA_SETUPS = (
    _Setup("1/3 removed + Q8_0 weights", removed=1 / 3, weights="q8_0"),
    _Setup("1/3 removed + q8_0 cache", removed=1 / 3, cache=Q8),
    _Setup("1/3 removed + Q4_0 weights", removed=1 / 3, weights="q4_0"),
)
_ROTATION = ("q4_0 cache", "q4_0 cache without rotation")  # (rotated, not): the rotation claim's pair
_KEYS_VALUES = (
    "q4_0 keys + q8_0 values",
    "q8_0 keys + q4_0 values",
)  # (keys coarser, values coarser): the K/V claim's pair


def chosen_setups(extra: Sequence[str] = ()) -> list[_Setup]:
    """``SETUPS`` and the ``EXTRA_SETUPS`` named in ``extra``."""
    known = {s.name: s for s in EXTRA_SETUPS}
    unknown = [name for name in extra if name not in known]
    if unknown:
        raise ValueError(f"no extra setup {unknown}: the extra setups are {', '.join(known)}")
    return [*SETUPS, *(known[name] for name in extra)]


# ---- the files --------------------------------------------------------------------------------------
def _file_name(removed: float, weights: str) -> str:
    """``14b_KV_groups-0.333.q8_0.gguf``: the file of a share removed and a weight type."""
    return f"14b_KV_groups-{removed:.3f}.{weights}.gguf"


def export_files(
    models: Mapping[float, nn.Module], setups: Sequence[_Setup], folder: Path, tokenizer_gguf: Path
) -> dict[tuple[float, str], GgufExport]:
    """``{(removed, weights): export}``: each file the setups need, written once into ``folder``
    (``models``: the model with each share of KV groups removed)."""
    out = {}
    for removed, weights in dict.fromkeys(s.file for s in setups):
        path = Path(folder) / _file_name(removed, weights)
        out[removed, weights] = export_gguf(
            models[removed], path, tokenizer_gguf=tokenizer_gguf, dtype=weights, pad_uneven=True
        )
    return out


def export_setups(
    model: nn.Module, importance: Mapping[str, torch.Tensor], setups: Sequence[_Setup], language_model: str
) -> dict[tuple[float, str], GgufExport]:
    """``export_files`` for ``setups``, into a scratch folder deleted when the process (the
    notebook's kernel) exits: ``model`` with each share of KV groups the setups remove taken out
    by ``importance`` (I_h; ``pruned_variants``), written with ``language_model``'s tokenizer
    (``registry.tokenizer_gguf``). ``keep_files`` copies out the files worth keeping."""
    from ...base.scratch import scratch_folder
    from ...zoo.registry import tokenizer_gguf
    from ..experiments.buys_and_breaks import pruned_variants

    shares = sorted({s.removed for s in setups})
    variants = pruned_variants(model, importance, shares=shares, units=["KV groups"])
    models = {share: m for (_, share), m in variants.items()}
    folder = scratch_folder(prefix="sixteen-heads-14b-")
    return export_files(models, setups, folder=folder, tokenizer_gguf=tokenizer_gguf(language_model))


def keep_files(files: Mapping[tuple[float, str], GgufExport], table: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Copy the files of the setups unbeaten at any context size (``table``: ``frontier``'s)
    into ``out_dir``, for a reader to serve; the others stay where they were written."""
    from ...base.atomic import atomic_path

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    unbeaten = table[table["unbeaten"].astype(bool)]
    kept = []
    for key in dict.fromkeys(zip(unbeaten["removed"], unbeaten["weights"], strict=True)):
        source = files[key].path
        with atomic_path(Path(out_dir) / source.name) as tmp:
            shutil.copyfile(source, tmp)
            tmp.chmod(0o644)
        kept.append(Path(out_dir) / source.name)
    return kept


# ---- quality and speed: every setup open at once ---------------------------------------------------------
def log_softmax(logits: np.ndarray) -> torch.Tensor:
    """``[positions, vocab]`` float32 log-probabilities from llama.cpp's logits."""
    return torch.log_softmax(torch.from_numpy(logits), dim=-1)


def text_scores(reference: torch.Tensor, setup: torch.Tensor, targets: torch.Tensor) -> tuple[float, float]:
    """``(nll, kl)`` in nats per scored token: the setup's negative log-likelihood of ``targets``
    and ``KL(reference || setup)`` over the whole vocabulary (as llama.cpp's perplexity tool
    defines it), from ``[positions, vocab]`` log-probabilities."""
    nll = -setup.gather(1, targets[:, None]).double().mean()
    kl = (reference.exp() * (reference - setup)).sum(-1).double().mean()
    return float(nll), float(kl)


class Served:
    """Every setup's file loaded and a context of ``cells`` cells open for it; a context
    manager. A setup llama.cpp refuses is listed in ``refused`` with llama.cpp's reason."""

    def __init__(
        self, files: Mapping[tuple[float, str], GgufExport], setups: Sequence[_Setup], cells: int, threads: int
    ):
        self.files, self.setups, self.cells, self.threads = files, list(setups), cells, threads
        self.refused: dict[str, str] = {}

    def __enter__(self) -> Served:
        self._stack = ExitStack()
        models = {key: self._stack.enter_context(LlamaModel(f.path)) for key, f in self.files.items()}
        self.contexts = {}
        for s in self.setups:
            try:
                context = models[s.file].context(self.cells, s.cache, threads=self.threads)
                self.contexts[s.name] = self._stack.enter_context(context)
            except LlamaApiError as err:
                self.refused[s.name] = str(err)
        if REFERENCE not in self.contexts:
            self._stack.close()
            raise LlamaApiError(f"llama.cpp refused the reference: {self.refused.get(REFERENCE)}")
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def scores(self, texts: torch.Tensor, progress: bool = True) -> pd.DataFrame:
        """One row per setup and text (``texts``: ``[n, tokens]`` ids): the later half scored
        (tokens ``tokens // 2 ..``), its mean nll and KL from the reference in nats per token."""
        first = texts.shape[1] // 2
        rows = []
        for i, ids in enumerate(tqdm(texts.tolist(), desc="texts, every setup", disable=not progress)):
            targets = torch.tensor(ids[first:])
            reference = log_softmax(self.contexts[REFERENCE].logits(ids, first_output=first - 1)[:-1])
            for name, ctx in self.contexts.items():
                lp = reference if name == REFERENCE else log_softmax(ctx.logits(ids, first_output=first - 1)[:-1])
                nll, kl = text_scores(reference, lp, targets)
                rows.append({"setup": name, "text": i, "tokens": len(targets), "nll": nll, "kl": kl})
        return pd.DataFrame(rows)

    def speed(self, prompt: Sequence[int], new_tokens: int, threads: Sequence[int], repeats: int) -> pd.DataFrame:
        """Prompt and generated tokens per second: per thread count, every setup once to warm up,
        then ``repeats`` rounds with the setups timed in turn (so that a slow moment of the
        machine falls on all of them alike)."""
        if len(prompt) + new_tokens > self.cells:
            raise ValueError(
                f"a prompt of {len(prompt)} tokens and {new_tokens} new ones need {len(prompt) + new_tokens} "
                f"cells; the contexts hold {self.cells}: open Served with cells >= {len(prompt) + new_tokens}"
            )
        rows = []
        for n in threads:
            for ctx in self.contexts.values():
                ctx.timed(prompt, new_tokens, threads=n)
            for r in tqdm(range(repeats), desc=f"speed, {n} threads", leave=False):
                for name, ctx in self.contexts.items():
                    rows.append({"setup": name, "threads": n, "repeat": r, **ctx.timed(prompt, new_tokens, threads=n)})
        return pd.DataFrame(rows)


MEMORY_SHOWN = [
    "setup",
    "cells",
    "K type",
    "V type",
    "K rotated",
    "weight bytes",
    "weight bytes, predicted",
    "cache MiB",
    "cache bytes, predicted",
    "total MiB",
]  # the columns the chapter shows


# ---- memory --------------------------------------------------------------------------------------------
def memory_table(
    files: Mapping[tuple[float, str], GgufExport], setups: Sequence[_Setup], cells: Sequence[int]
) -> pd.DataFrame:
    """Per setup and context size: the weights' bytes llama.cpp counts (``llama_model_size``)
    and the arithmetic's, the KV cache llama.cpp logs (to 0.01 MiB) and the arithmetic's, its
    types and whether llama.cpp rotates keys and values, and the total (llama.cpp's)."""
    rows = []
    for key, f in files.items():
        with LlamaModel(f.path) as model:
            for s in (s for s in setups if s.file == key):
                for n in cells:
                    try:
                        with model.context(n, s.cache) as ctx:
                            # llama.cpp rounds a context up (to 256 cells): its log says how many
                            keys, values = predicted_cache_bytes(f.kv_heads, f.head_dim, ctx.cells, s.cache)
                            rows.append(
                                {
                                    "setup": s.name,
                                    "order": setups.index(s),
                                    "family": s.family,
                                    "cells": ctx.cells,
                                    "weights": s.weights,
                                    "removed": s.removed,
                                    "K type": ctx.k_type,
                                    "V type": ctx.v_type,
                                    "K rotated": ctx.rotated["k"],
                                    "V rotated": ctx.rotated["v"],
                                    "weight bytes": model.weight_bytes,
                                    "weight bytes, predicted": f.predicted_weight_bytes,
                                    "cache MiB": ctx.cache_mib,
                                    "cache bytes, predicted": keys + values,
                                    "total MiB": model.weight_bytes / MIB + ctx.cache_mib,
                                    "file": f.path.name,
                                }
                            )
                    except LlamaApiError:
                        continue  # Served lists the refusal with llama.cpp's reason
    return pd.DataFrame(rows)


# ---- summaries: every one from the per-text rows ---------------------------------------------------------
def _per_text(scores: pd.DataFrame, column: str = "nll") -> pd.DataFrame:
    """``[texts, setups]``: one column per setup, rows the texts (every setup read the same ones)."""
    table = scores.pivot(index="text", columns="setup", values=column)
    if table.isna().any().any():
        raise ValueError("every setup must read the same texts: some setup lacks a text another read")
    return table


def _bootstrap_means(differences: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``[R]``: the mean of ``differences`` (one per text) in each resample of texts (``indices``)."""
    return np.asarray(differences, dtype=np.float64)[indices].mean(1)


def interval(means: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The two-sided percentile interval at ``level`` of bootstrap ``means``."""
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def quality_table(
    scores: pd.DataFrame, n_resamples: int, *, level: float = LEVEL, seed: int = 0, refused: Mapping[str, str] = {}
) -> pd.DataFrame:
    """Per setup: perplexity on the scored tokens, its change from the reference (``exp`` of the
    mean nll difference, less 1) with a paired bootstrap interval over texts at ``level``, and the
    mean KL from the reference in nats per token; a setup llama.cpp refused, with its reason."""
    nll, kl = _per_text(scores), _per_text(scores, "kl")
    indices = resample_indices(len(nll), n_resamples, seed)
    rows = []
    for name in nll.columns:
        d = (nll[name] - nll[REFERENCE]).to_numpy()
        low, high = interval(_bootstrap_means(d, indices), level)
        rows.append(
            {
                "setup": name,
                "texts": len(d),
                "perplexity": float(np.exp(nll[name].mean())),
                "perplexity change": float(np.expm1(d.mean())),
                "change low": float(np.expm1(low)),
                "change high": float(np.expm1(high)),
                "KL": float(kl[name].mean()),
                "refused": "",
            }
        )
    rows += [{"setup": name, "refused": why} for name, why in refused.items()]
    return pd.DataFrame(rows)


def frontier(memory: pd.DataFrame, quality: pd.DataFrame) -> pd.DataFrame:
    """Per context size, the setups in order of total bytes, ``unbeaten`` where no other setup
    holds at most as many bytes with a lower perplexity (the frontier of quality against memory)."""
    read = quality.dropna(subset=["perplexity"])  # a setup llama.cpp refused is on no frontier
    table = memory.merge(read[["setup", "perplexity", "perplexity change", "KL"]], on="setup")
    out = []
    for _, rows in table.groupby("cells"):
        rows = rows.sort_values(["total MiB", "perplexity"]).copy()
        rows["unbeaten"] = [
            not ((rows["total MiB"] <= r["total MiB"]) & (rows["perplexity"] < r["perplexity"])).any()
            for _, r in rows.iterrows()
        ]
        out.append(rows)
    return pd.concat(out, ignore_index=True)


def partners(memory: pd.DataFrame, axis: str) -> pd.DataFrame:
    """Each removal setup paired, per context size, with the quantize-only setup holding the
    most bytes within the removal's on ``axis`` (``"total"``: weights and cache, any
    quantization; ``"cache"``: the cache alone, against setups that quantize the cache alone,
    the removals that quantize nothing), chosen from the predicted bytes before any score is
    read; ``within``: every quantize-only setup within the removal's bytes."""
    table = memory.assign(
        total=memory["weight bytes, predicted"] + memory["cache bytes, predicted"],
        cache=memory["cache bytes, predicted"],
    )
    rows = []
    for cells, at in table.groupby("cells"):
        removals = at[at["family"] == "removal"]
        rivals = at[at["family"] == "quantized"]
        if axis == "cache":
            removals = removals[
                (removals["weights"] == "f16") & (removals["K type"] == "f16") & (removals["V type"] == "f16")
            ]
            rivals = rivals[(rivals["weights"] == "f16")]
        for _, r in removals.iterrows():
            # the most bytes first; among equals, the setup listed first (llama.cpp's default rotation)
            within = rivals[rivals[axis] <= r[axis]].sort_values([axis, "order"], ascending=[False, True])
            rows.append(
                {
                    "axis": axis,
                    "cells": cells,
                    "removal": r["setup"],
                    "partner": within["setup"].iloc[0] if len(within) else "",
                    "within": ", ".join(within["setup"]),
                    "removal bytes": int(r[axis]),
                    "partner bytes": int(within[axis].iloc[0]) if len(within) else 0,
                }
            )
    return pd.DataFrame(rows)


def pair_table(
    scores: pd.DataFrame, memory: pd.DataFrame, *, n_resamples: int, level: float = LEVEL, seed: int = 0
) -> pd.DataFrame:
    """``partners`` on both axes with the gap ``nll(partner) - nll(removal)`` in nats per token
    (below 0: quantizing costs less) and its interval at ``level``; ``quantizing wins`` where the
    interval lies below 0; ``removal wins`` where removal beats every quantize-only setup within
    its bytes, each gap's interval above 0 at ``level`` shared among them (Bonferroni)."""
    nll = _per_text(scores)
    indices = resample_indices(len(nll), n_resamples, seed)
    pairs = pd.concat([partners(memory, "total"), partners(memory, "cache")], ignore_index=True)
    rows = []
    for _, p in pairs.iterrows():
        row = p.to_dict()
        if not p["partner"] or p["partner"] not in nll or p["removal"] not in nll:
            rows.append({**row, "quantizing wins": False, "removal wins": False})
            continue
        d = (nll[p["partner"]] - nll[p["removal"]]).to_numpy()
        low, high = interval(_bootstrap_means(d, indices), level)
        rivals = [r for r in p["within"].split(", ") if r in nll]
        shared = 1 - (1 - level) / len(rivals)
        beats_all = all(
            interval(_bootstrap_means((nll[r] - nll[p["removal"]]).to_numpy(), indices), shared)[0] > 0 for r in rivals
        )
        rows.append(
            {
                **row,
                "gap": float(d.mean()),
                "low": low,
                "high": high,
                "quantizing wins": high < 0,
                "removal wins": beats_all,
            }
        )
    return pd.DataFrame(rows)


def _contrast_table(
    scores: pd.DataFrame,
    pairs: Mapping[str, tuple[str, str]],
    *,
    n_resamples: int,
    level: float = LEVEL,
    seed: int = 0,
) -> pd.DataFrame:
    """Per named contrast ``(a, b)``: the gap ``nll(a) - nll(b)`` in nats per token with its
    interval at ``level``, and each setup's perplexity change; a contrast whose setup llama.cpp
    refused has no gap."""
    nll = _per_text(scores)
    indices = resample_indices(len(nll), n_resamples, seed)
    rows = []
    for name, (a, b) in pairs.items():
        row = {"contrast": name, "a": a, "b": b}
        if a in nll and b in nll:
            d = (nll[a] - nll[b]).to_numpy()
            low, high = interval(_bootstrap_means(d, indices), level)
            change = {
                f"{k} change": float(np.expm1((nll[s] - nll[REFERENCE]).mean())) for k, s in (("a", a), ("b", b))
            }
            row |= {"gap": float(d.mean()), "low": low, "high": high, **change}
        rows.append(row)
    return pd.DataFrame(rows)


_CONTRASTS = {"rotation": _ROTATION[::-1], "keys against values": _KEYS_VALUES}  # gap > 0: the claim's way


def budget_table(table: pd.DataFrame, budgets: Sequence[float]) -> pd.DataFrame:
    """Per context size and budget (a share of the reference's total bytes): the setup of the
    lowest perplexity within it, its bytes and its change (``table``: ``frontier``'s)."""
    rows = []
    for cells, at in table.groupby("cells"):
        total = float(at.loc[at["setup"] == REFERENCE, "total MiB"].iloc[0])
        for b in budgets:
            fits = at[at["total MiB"] <= b * total + 1e-9]
            best = fits.sort_values("perplexity").iloc[0] if len(fits) else None
            rows.append(
                {
                    "cells": cells,
                    "budget": b,
                    "budget MiB": b * total,
                    "best setup": best["setup"] if best is not None else "",
                    "its MiB": best["total MiB"] if best is not None else np.nan,
                    "its perplexity change": best["perplexity change"] if best is not None else np.nan,
                    "setups within": len(fits),
                }
            )
    return pd.DataFrame(rows)


def summaries(
    scores: pd.DataFrame,
    memory: pd.DataFrame,
    *,
    refused: Mapping[str, str],
    budgets: Sequence[float],
    n_resamples: int,
    seed: int = 0,
    speed: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """Every table the chapter shows and its rules read, each from the per-text ``scores`` and
    ``memory``: ``14b_quality``, ``14b_frontier``, ``14b_budgets``, ``14b_pairs`` and
    ``14b_contrasts``, at ``LEVEL``. With ``speed`` (``Served.speed``'s timings), also
    ``14b_speed_summary`` from them, and the raw rows ``14b_scores`` and ``14b_speed``."""
    stats = {"n_resamples": n_resamples, "seed": seed}
    quality = quality_table(scores, refused=refused, **stats)
    table = frontier(memory, quality)
    tables = {
        "14b_quality": quality,
        "14b_frontier": table,
        "14b_budgets": budget_table(table, budgets),
        "14b_pairs": pair_table(scores, memory, **stats),
        "14b_contrasts": _contrast_table(scores, _CONTRASTS, **stats),
    }
    if speed is not None:
        tables |= {"14b_scores": scores, "14b_speed": speed, "14b_speed_summary": speed_summary(speed)}
    return tables


def speed_summary(speed: pd.DataFrame) -> pd.DataFrame:
    """Per setup and thread count: the median speeds over repeats, and their ratio to the
    reference's median at the same thread count."""
    columns = ["prompt tokens per second", "generated tokens per second"]
    med = speed.groupby(["setup", "threads"])[columns].median().reset_index()
    ref = med[med["setup"] == REFERENCE].set_index("threads")[columns]
    for c in columns:
        med[c.replace(" tokens per second", " x reference")] = med[c] / med["threads"].map(ref[c])
    return med


# ---- texts and the figure ------------------------------------------------------------------------------
def chapter_texts(tokenizer, texts: int, *, tokens: int, exclude, version: str = "web", seed: int = 0) -> torch.Tensor:
    """``[texts, tokens]`` ids: the first ``tokens`` tokens of distinct Bible chapters of at least
    that many, none in ``exclude``, drawn with ``seed``."""
    import random

    from ...zoo.long_texts import chapter_token_ids

    long = {
        k: ids
        for k, ids in chapter_token_ids(tokenizer, version).items()
        if len(ids) >= tokens and k not in set(exclude)
    }
    if texts > len(long):
        raise ValueError(
            f"{texts} texts of {tokens} tokens asked for, {len(long)} chapters have that many: "
            "ask for fewer or shorter"
        )
    keys = random.Random(seed).sample(sorted(long), texts)
    return torch.tensor([long[k][:tokens] for k in keys], dtype=torch.long)


def figure(table: pd.DataFrame):
    """Perplexity change (log scale) and KL against total MiB, one panel per context size, the
    unbeaten setups ringed and joined."""
    import matplotlib.pyplot as plt

    sizes = sorted(table["cells"].unique())
    fig, axes = plt.subplots(2, len(sizes), figsize=(5.2 * len(sizes), 7), squeeze=False, sharex="col")
    colours = {"reference": "black", "quantized": "tab:blue", "removal": "tab:red"}
    for col, cells in enumerate(sizes):
        at = table[table["cells"] == cells].sort_values("total MiB")
        for row, (column, label) in enumerate(
            (("perplexity change", "perplexity change"), ("KL", "KL, nats per token"))
        ):
            ax = axes[row][col]
            ax.scatter(at["total MiB"], at[column], c=at["family"].map(colours), s=28, zorder=3)
            best = at[at["unbeaten"]]
            ax.plot(best["total MiB"], best[column], color="grey", lw=1, zorder=2)
            ax.scatter(best["total MiB"], best[column], s=90, facecolors="none", edgecolors="black", zorder=4)
            for _, r in at.iterrows():
                ax.annotate(
                    r["setup"], (r["total MiB"], r[column]), fontsize=6, xytext=(3, 2), textcoords="offset points"
                )
            ax.set_yscale("symlog", linthresh=1e-4)  # the reference sits at 0; the rest spans 4 decades
            ax.set_ylabel(label)
            if row == 0:
                ax.set_title(f"{cells:,} cells")
            else:
                ax.set_xlabel("weights + KV cache, MiB (llama.cpp)")
    fig.tight_layout()
    return fig


CHAPTER = "14b_served_at_equal_memory"
_Q8_MARGIN = 0.01  # "under 1% perplexity": the whole interval of the change below +1%
_AXES = {"total": "weights and cache", "cache": "the cache alone"}


def _change(row: pd.Series) -> str:
    return f"{row['perplexity change']:+.2%} [{row['change low']:+.2%}, {row['change high']:+.2%}]"


def _q8_cache_cheap(r: Results) -> tuple[str, str]:
    """Non-inferiority: the q8_0 cache's perplexity change from the reference, its interval at
    ``LEVEL`` wholly below ``q8_0_margin`` for reproduced, wholly above it for not reproduced."""
    margin = r.params.get("q8_0_margin", _Q8_MARGIN)
    quality = r["14b_quality"].set_index("setup")
    row = present(quality.loc[quality.index == "q8_0 cache"], "14b_quality: q8_0 cache").iloc[0]
    text = f"perplexity {_change(row)}, KL {row['KL']:.5f} nats per token (margin {margin:.0%})"
    if row["change high"] < margin:
        return text, REPRODUCED
    return text, NOT_REPRODUCED if row["change low"] > margin else CANNOT_TELL


def _pairs_text(pairs: pd.DataFrame, axis: str) -> str:
    """How many pairs each side wins (and how many distinct comparisons they are: quality is read
    once, so pairs at two context sizes can repeat one), and the removal's perplexity against its
    partner's over the pairs, the effect's size (details: the chapter's pair table)."""
    q, rem = int(pairs["quantizing wins"].sum()), int(pairs["removal wins"].sum())
    distinct = len(pairs.drop_duplicates(["removal", "partner"]))
    read = pairs.dropna(subset=["gap"]) if "gap" in pairs else pairs.iloc[:0]
    ratios = np.exp(-read["gap"].to_numpy(dtype=float))
    size = f"; the removal's perplexity {ratios.min():.2f}x to {ratios.max():.2f}x its partner's" if len(read) else ""
    return f"on {_AXES[axis]}, quantizing wins {q} of {len(pairs)} pairs ({distinct} distinct) and removal {rem}{size}"


def _pairs_verdict(pairs: pd.DataFrame) -> str:
    """Quantizing wins every pair: reproduced; removal wins every pair: not reproduced; removal
    wins some and quantizing none: not reproduced; quantizing wins some and the rest are
    undecided or removal's: partly; nothing decided: cannot tell."""
    q, rem, n = int(pairs["quantizing wins"].sum()), int(pairs["removal wins"].sum()), len(pairs)
    if n and q == n:
        return REPRODUCED
    if rem and not q:
        return NOT_REPRODUCED
    return PARTLY if q else CANNOT_TELL


def _pairs(r: Results, axis: str) -> tuple[str, str]:
    table = r["14b_pairs"]
    pairs = present(table[table["axis"] == axis], f"14b_pairs: {axis}")
    return _pairs_text(pairs, axis), _pairs_verdict(pairs)


def quantizing_beats_removal(r: Results) -> tuple[str, str]:
    """Each removal against the quantize-only setup holding the most bytes (weights and cache)
    within the removal's, at each context size (``_pairs_verdict``)."""
    return _pairs(r, "total")


def _ranking_holds(r: Results) -> tuple[str, str]:
    """Chapter 14's ranking in llama.cpp: each removal that quantizes nothing against the
    cache-only quantization holding the most cache bytes within its (``_pairs_verdict``)."""
    return _pairs(r, "cache")


def _contrast(r: Results, name: str, what: str) -> tuple[str, str]:
    table = r["14b_contrasts"].set_index("contrast")
    row = present(table.loc[table.index == name], f"14b_contrasts: {name}").iloc[0]
    if pd.isna(row.get("gap", math.nan)):
        return f"llama.cpp refused {row['a']} or {row['b']} (the chapter lists its reason)", CANNOT_TELL
    text = (
        f"{row['a']} {row['a change']:+.2%} against {row['b']} {row['b change']:+.2%} perplexity; {what} "
        f"{row['gap']:+.4f} [{row['low']:+.4f}, {row['high']:+.4f}] nats per token"
    )
    if row["low"] > 0:
        return text, REPRODUCED
    return text, NOT_REPRODUCED if row["high"] < 0 else CANNOT_TELL


def _rotation_helps(r: Results) -> tuple[str, str]:
    """The unrotated q4_0 cache's nll less the rotated one's: its interval above 0 for
    reproduced, below 0 for not reproduced; cannot tell where llama.cpp's log says it did not
    rotate the rotated setup's keys (a head size it does not rotate), or rotated the other's."""
    memory = r["14b_memory"].drop_duplicates("setup").set_index("setup")
    rotated, plain = _ROTATION
    if rotated in memory.index and plain in memory.index:
        if not memory.loc[rotated, "K rotated"] or memory.loc[plain, "K rotated"]:
            return (
                f"llama.cpp's log says it rotated {'neither' if not memory.loc[rotated, 'K rotated'] else 'both'}",
                CANNOT_TELL,
            )
    return _contrast(r, "rotation", "rotation saves")


def _keys_more_sensitive(r: Results) -> tuple[str, str]:
    """q4_0 keys with q8_0 values against q8_0 keys with q4_0 values (the same bytes): the nll
    gap's interval above 0 (coarse keys cost more) for reproduced, below 0 for not reproduced."""
    return _contrast(r, "keys against values", "coarse keys cost")


def _units(r: Results) -> tuple[int, str]:
    """The texts every interval of the chapter resamples (``Claim.units``)."""
    return int(r["14b_quality"]["texts"].dropna().iloc[0]), "texts"


def sample(r: Results) -> str:
    texts, _ = _units(r)
    return f"{texts} texts (Bible chapters), each the bootstrap's unit; intervals at {LEVEL:.0%}"


CLAIMS = [
    Claim(
        "served_q8_cache_cheap",
        "Beyond the paper, served in llama.cpp",
        "A q8_0 KV cache costs under 1% perplexity",
        "+0.07% perplexity for a q8_0 K and V cache on an 8B model (llama.cpp's pull request adding quantized V "
        "caches with flash attention)",
        f"reproduced: the {LEVEL:.0%} interval of the perplexity change wholly below +{{q8_0_margin:.0%}}; "
        "not reproduced: wholly above it; cannot tell: it holds the margin",
        CHAPTER,
        _q8_cache_cheap,
        parameters={"q8_0_margin": _Q8_MARGIN},
        measured_on="perplexity in llama.cpp",
        sample=sample,
        units=_units,
    ),
    Claim(
        "served_quantizing_beats_removal",
        "Beyond the paper, served in llama.cpp",
        "At equal memory (weights and cache), quantizing beats removing KV groups",
        "no published comparison on one axis; KV-cache methods report memory against their own baselines",
        "each removal against the quantize-only setup with the most bytes within its own (chosen from the "
        "predicted bytes before any score is read; among equals, llama.cpp's default, rotation on), at each context "
        f"size: reproduced: quantizing wins every pair (the gap's {LEVEL:.0%} interval below 0); not reproduced: "
        "removal wins pairs (it beats every quantize-only setup within its bytes, Bonferroni among them: a stricter "
        "bar than quantizing's) and quantizing none; partly: quantizing wins some; cannot tell: none decided",
        CHAPTER,
        quantizing_beats_removal,
        measured_on="perplexity and bytes in llama.cpp",
        sample=sample,
        units=_units,
    ),
    Claim(
        "served_ranking_holds",
        "Beyond the paper, served in llama.cpp",
        "Chapter 14's ranking holds in llama.cpp: at equal cache bytes, quantizing the cache beats removing KV groups",
        "chapter 14 (transformers' caches): quantizing the cache costs less perplexity than removing KV groups",
        "as the claim above, on the cache's bytes alone, each removal that quantizes nothing against the cache-only "
        "quantization with the most cache bytes within its own",
        CHAPTER,
        _ranking_holds,
        measured_on="perplexity and KV bytes in llama.cpp",
        sample=sample,
        units=_units,
    ),
    Claim(
        "served_rotation_helps",
        "Beyond the paper, served in llama.cpp",
        "Rotating queries and keys before a q4_0 cache lowers its cost",
        "+11% perplexity without rotation, +0.9% with, for a q4_0 cache on a 30B model (llama.cpp's pull request "
        "that rotates activations)",
        f"reproduced: the unrotated q4_0 cache's nll less the rotated one's, its {LEVEL:.0%} interval above 0; "
        "not reproduced: below 0; cannot tell: it holds 0, or llama.cpp's log says it rotated neither setup's "
        "keys or both",
        CHAPTER,
        _rotation_helps,
        measured_on="perplexity in llama.cpp",
        sample=sample,
        units=_units,
    ),
    Claim(
        "served_keys_more_sensitive",
        "Beyond the paper, served in llama.cpp",
        "Keys are more sensitive to quantization than values",
        "keys carry outliers per channel, values do not (KIVI); `-ctk q8_0 -ctv q4_0` is the setting users try",
        f"reproduced: q4_0 keys with q8_0 values cost more than q8_0 keys with q4_0 values (the same bytes), the "
        f"nll gap's {LEVEL:.0%} interval above 0; not reproduced: below 0; cannot tell: it holds 0, or llama.cpp "
        "refuses one of them",
        CHAPTER,
        _keys_more_sensitive,
        measured_on="perplexity in llama.cpp",
        sample=sample,
        units=_units,
    ),
]


def _mib(x: float) -> str:
    return f"{x:,.0f} MiB" if x >= 10 else f"{x:.2f} MiB"


def _threads(n: int) -> str:
    return f"{n} thread{'s' * (n != 1)}"


def memory_lines(tables: ChapterTables) -> list[str]:
    """Whether llama.cpp allocates what the arithmetic says, and the reference's bytes."""
    memory = tables["14b_memory"]
    weights = int((memory["weight bytes"] == memory["weight bytes, predicted"]).sum())
    gap = (memory["cache MiB"] - memory["cache bytes, predicted"] / 2**20).abs().max()
    ref = memory[memory["setup"] == REFERENCE].sort_values("cells")
    caches = words([f"{_mib(r['cache MiB'])} at {int(r['cells']):,} cells" for _, r in ref.iterrows()])
    return [
        f"**Memory.** llama.cpp's weights equal the arithmetic to the byte in {weights} of {len(memory)} rows. "
        f"Its cache is at most {gap:.3f} MiB from the arithmetic (its log rounds to 0.01 MiB). "
        f"The reference holds {_mib(ref['weight bytes'].iloc[0] / 2**20)} of weights and {caches} of cache."
    ]


def _quality_lines(tables: ChapterTables) -> list[str]:
    """Each setup's perplexity change and KL, cheapest first; refusals with their reason."""
    quality = tables["14b_quality"]
    read_ = quality[quality["refused"].fillna("") == ""].sort_values("perplexity change")
    ref = read_[read_["setup"] == REFERENCE].iloc[0]
    parts = [
        f"* {r['setup']}: {r['perplexity change']:+.2%} [{r['change low']:+.2%}, {r['change high']:+.2%}], "
        f"KL {r['KL']:.4f}"
        for _, r in read_.iterrows()
        if r["setup"] != REFERENCE
    ]
    lines = [
        f"**Quality.** The reference's perplexity is {ref['perplexity']:.2f} on {int(ref['texts'])} texts. "
        "Each setup's change from it, with its interval, and its KL in nats per token:\n\n" + "\n".join(parts)
    ]
    refused = quality[quality["refused"].fillna("") != ""]
    lines += [f"llama.cpp refused {r['setup']}: {r['refused']}" for _, r in refused.iterrows()]
    return lines


def _frontier_lines(tables: ChapterTables) -> list[str]:
    """The unbeaten setups per context size, and whether a removal is among them."""
    table = tables["14b_frontier"]
    lines = []
    for cells, at in table.groupby("cells"):
        best = at[at["unbeaten"].astype(bool)].sort_values("total MiB")
        removal = best["family"].eq("removal").any()
        named = "\n".join(
            f"* {r['setup']}: {_mib(r['total MiB'])}, {r['perplexity change']:+.2%}" for _, r in best.iterrows()
        )
        lines.append(
            f"**Unbeaten at {int(cells):,} cells** (by point estimates). "
            + (
                "A setup with KV groups removed is among them."
                if removal
                else "No setup with KV groups removed is among them."
            )
            + f"\n\n{named}"
        )
    return lines


def _speed_lines(tables: ChapterTables) -> list[str]:
    """Generation and prompt speed against the reference, at the most threads timed."""
    speed = tables["14b_speed_summary"]
    at = speed[speed["threads"] == speed["threads"].max()].sort_values("generated x reference")
    slow, fast = at.iloc[0], at.iloc[-1]
    return [
        f"**Speed at {_threads(int(at['threads'].iloc[0]))}.** "
        f"Generation runs from {slow['generated x reference']:.2f}x the reference ({slow['setup']}) "
        f"to {fast['generated x reference']:.2f}x ({fast['setup']}). "
        f"Prompts run from {at['prompt x reference'].min():.2f}x to {at['prompt x reference'].max():.2f}x."
    ]


def _rotation_lines(tables: ChapterTables) -> list[str]:
    """Whether llama.cpp rotated each quantized cache, as its log says."""
    memory = tables["14b_memory"].drop_duplicates("setup")
    quantized = memory[(memory["K type"] != "f16") | (memory["V type"] != "f16")]
    both = quantized["K rotated"].astype(bool) & quantized["V rotated"].astype(bool)
    on = quantized[both]["setup"].tolist()
    off = quantized[~both]["setup"].tolist()
    return [
        "**Rotation.** llama.cpp's log says it rotates keys and values before "
        + (words(on) if on else "no quantized cache")
        + "."
        + (" It does not before:\n\n" + "\n".join(f"* {setup}" for setup in off) if off else "")
    ]


def findings(tables: ChapterTables) -> str:
    parts = memory_lines(tables) + _quality_lines(tables) + _rotation_lines(tables)
    return "\n\n".join(parts + _frontier_lines(tables) + _speed_lines(tables))
