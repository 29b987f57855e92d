"""Chapter 13's pruned models served by llama.cpp: each variant written as a GGUF file
(``serving.gguf_export``) and run in llama.cpp (``serving.llama_cpp``), against transformers.

    exact, speed = served(variants, tokenizer_gguf, prompt=prompt, new_tokens=64, verses=verses, threads=(1, 2))

* ``exact`` (one row per variant): the float32 file in llama.cpp's exact settings: greedy tokens
  and per-token log-probabilities on the verses against transformers', and the KV cache llama.cpp
  allocates in both settings against ``llama_cpp.predicted_kv_bytes``; the float16 file's size
  and its greedy tokens in llama.cpp's default settings.
* ``speed`` (one row per variant, thread count and repeat): prompt and generation tokens per
  second of the float16 file in the default settings, as llama.cpp times them, the files timed
  in turn within each repeat (``_serve_in_turn``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from ...heads.sites import attention_sites
from ...serving.gguf_export import export_gguf
from ...serving.llama_cpp import LlamaCpp, RuntimeSettings, predicted_kv_bytes

_SPEED = ["prompt tokens per second", "generated tokens per second"]
RUNTIME_SHOWN = [
    "unit",
    "share",
    "query heads",
    "padded heads",
    "KV heads",
    "file MiB (f16)",
    "KV MiB, llama.cpp (f16)",
    "KV MiB, predicted (f16)",
    "greedy tokens equal (exact)",
    "greedy tokens equal (default)",
    "perplexity, llama.cpp",
    "perplexity, transformers",
    "largest log-prob gap",
]


def _transformers_reference(
    model: nn.Module, prompt: Sequence[int], new_tokens: int, verses: Sequence[Sequence[int]]
) -> tuple[list[int], np.ndarray]:
    """Greedy tokens after ``prompt`` and the log-probabilities of every verse token after the
    first (concatenated over ``verses``), in float32 with transformers."""
    device = next(model.parameters()).device
    with torch.no_grad():
        ids = torch.tensor([list(prompt)], device=device)
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            use_cache=True,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=0,
        )
        logprobs = []
        for verse in verses:
            logits = model(torch.tensor([list(verse)], device=device)).logits[0].double().cpu()
            logprobs.append(torch.log_softmax(logits, -1)[:-1].gather(1, torch.tensor(verse[1:])[:, None])[:, 0])
    return out[0, len(prompt) :].tolist(), torch.cat(logprobs).numpy()


def _equal_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share before they first differ."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _cache_columns(run: LlamaCpp, kv_heads: Sequence[int], head_dim: int, tag: str) -> dict:
    k, v = predicted_kv_bytes(
        kv_heads, head_dim, cells=run.cells, cache_type=run.cache_type, flash_attention=run.flash_attention
    )
    return {
        f"KV MiB, llama.cpp ({tag})": run.kv_mib,
        f"KV MiB, predicted ({tag})": (k + v) / 2**20,
        f"K MiB, llama.cpp ({tag})": run.k_mib,
        f"V MiB, llama.cpp ({tag})": run.v_mib,
        f"flash attention ({tag})": run.flash_attention,
        "cells": run.cells,
    }


def _serve_exactly(
    model: nn.Module,
    folder: Path,
    *,
    name: str,
    tokenizer_gguf: Path,
    prompt: Sequence[int],
    new_tokens: int,
    verses: Sequence[Sequence[int]],
    threads: int,
) -> tuple[dict, list[int], object]:
    """One variant in the exact settings: its row (module doc), transformers' greedy tokens, and
    its float16 export (``GgufExport``) for the default settings."""
    tokens, reference = _transformers_reference(model, prompt, new_tokens, verses)
    head_dim = attention_sites(model)[0].head_dim
    exact_file = export_gguf(model, folder / f"{name}.f32.gguf", tokenizer_gguf=tokenizer_gguf, pad_uneven=True)
    served = export_gguf(
        model, folder / f"{name}.f16.gguf", tokenizer_gguf=tokenizer_gguf, dtype="f16", pad_uneven=True
    )
    with LlamaCpp(exact_file.path, RuntimeSettings(threads=threads, exact=True)) as run:
        exact_tokens = run.greedy(prompt, new_tokens)
        logprobs = np.concatenate([run.token_logprobs(v) for v in verses])
        row = _cache_columns(run, exact_file.kv_heads, head_dim, "f32")
    exact_file.path.unlink()
    row.update(
        {
            "query heads": sum(len(s.heads) for s in attention_sites(model)),
            "padded heads": served.padded_heads,
            "head dim": head_dim,
            "KV heads": sum(served.kv_heads),
            "file MiB (f32)": exact_file.file_bytes / 2**20,
            "file MiB (f16)": served.file_bytes / 2**20,
            "file": served.path.name,
            "greedy tokens equal (exact)": _equal_prefix(exact_tokens, tokens),
            "new tokens": new_tokens,
            "perplexity, llama.cpp": float(np.exp(-logprobs.mean())),
            "perplexity, transformers": float(np.exp(-reference.mean())),
            "largest log-prob gap": float(np.abs(logprobs - reference).max()),
            "scored tokens": len(reference),
            "verses": len(verses),
        }
    )
    return row, tokens, served


def _serve_in_turn(
    files: Mapping[tuple[str, float], object],
    rows: Mapping[tuple[str, float], dict],
    *,
    tokens: Mapping[tuple[str, float], list[int]],
    prompt: Sequence[int],
    new_tokens: int,
    threads: Sequence[int],
    repeats: int,
) -> list[dict]:
    """Every variant's float16 file in llama.cpp's default settings, one server each, open
    together: per thread count a warm-up run of each (at the fewest threads, the greedy run whose
    tokens and cache fill ``rows``), then ``repeats`` rounds that time each file in turn, so that
    a drift of the machine's speed reaches every file alike instead of the last ones."""
    from contextlib import ExitStack

    timed = []
    for n in threads:
        with ExitStack() as stack:
            runs = {
                key: stack.enter_context(LlamaCpp(f.path, RuntimeSettings(threads=n, exact=False)))
                for key, f in files.items()
            }
            for key, run in runs.items():
                if n == min(threads):
                    rows[key]["greedy tokens equal (default)"] = _equal_prefix(
                        run.greedy(prompt, new_tokens), tokens[key]
                    )
                    rows[key].update(_cache_columns(run, files[key].kv_heads, rows[key]["head dim"], "f16"))
                else:
                    run.timed(prompt, new_tokens)
            for i in range(repeats):
                timed += [
                    {"unit": key[0], "share": key[1], "threads": n, "repeat": i, **run.timed(prompt, new_tokens)}
                    for key, run in runs.items()
                ]
    return timed


def served(
    variants: Mapping[tuple[str, float], nn.Module],
    tokenizer_gguf: Path,
    *,
    prompt: Sequence[int],
    new_tokens: int,
    verses: Sequence[Sequence[int]],
    threads: Sequence[int] = (1, 2),
    repeats: int = 3,
    keep: tuple[str, float] | None = None,
    out_dir: Path | None = None,
    progress: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(exact, speed)`` for every variant (module doc). The float16 file of variant ``keep`` is
    moved to ``out_dir`` (as ``13_<unit>-<share>.f16.gguf``, named in the ``file`` column); the
    others are deleted once run. The exact settings run on the fewest threads: single tokens, as
    greedy decoding and forced log-probabilities pass them, ran fastest on one thread of this
    project's 2-core machine."""
    rows, tokens, files = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for (unit, share), model in tqdm(variants.items(), desc="served by llama.cpp", disable=not progress):
            name = f"{unit.replace(' ', '_')}-{share:.3f}"
            row, tokens[unit, share], files[unit, share] = _serve_exactly(
                model,
                Path(tmp),
                name=name,
                tokenizer_gguf=tokenizer_gguf,
                prompt=prompt,
                new_tokens=new_tokens,
                verses=verses,
                threads=min(threads),
            )
            rows[unit, share] = {"unit": unit, "share": share, **row}
        timed = _serve_in_turn(
            files, rows, tokens=tokens, prompt=prompt, new_tokens=new_tokens, threads=threads, repeats=repeats
        )
        for key, row in rows.items():
            if key == keep and out_dir is not None:
                Path(out_dir).mkdir(parents=True, exist_ok=True)
                row["file"] = f"13_{files[key].path.name}"
                shutil.move(files[key].path, Path(out_dir) / row["file"])
            else:
                row["file"] = ""
    return pd.DataFrame(list(rows.values())), pd.DataFrame(timed)


def speed_summary(speed: pd.DataFrame) -> pd.DataFrame:
    """Per variant and thread count: the median of each speed over the repeats, its spread
    (interquartile range / median) and the ratio to the unpruned model's median."""
    grouped = speed.groupby(["unit", "share", "threads"], sort=False)[_SPEED]
    median = grouped.median()
    spread = (grouped.quantile(0.75) - grouped.quantile(0.25)) / median
    out = median.join(spread, rsuffix=", spread")
    base = median.xs("unpruned", level="unit").droplevel("share")
    for column in _SPEED:
        out[f"{column}, ratio"] = (
            median[column] / base[column].reindex(median.index.get_level_values("threads")).to_numpy()
        )
    return out.reset_index()


_RUNTIME_VERSES = 6  # verses whose tokens llama.cpp scores one forced token at a time (about 30 ms a token)


def served_by_llama_cpp(
    variants: Mapping[tuple[str, float], nn.Module],
    tokenizer,
    *,
    model_name: str,
    texts: Sequence[str],
    prompts: Mapping[int, torch.Tensor],
    new_tokens: int,
    repeats: int,
    profile: str,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Chapter 13's call: ``served`` on the first sequence of the smallest batch's prompts, the
    first ``_RUNTIME_VERSES`` of ``texts``, one thread and every core this process has; the float16
    file of the smallest share of KV groups removed is kept in ``results/<profile>/``."""
    from ...base.cores import usable_cores
    from ...zoo.registry import tokenizer_gguf
    from ..store.results import results_dir

    verses = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts[:_RUNTIME_VERSES]]  # as lm_batches
    keep = ("KV groups", min(share for unit, share in variants if unit == "KV groups"))
    prompt = prompts[min(prompts)][0].tolist()
    return served(
        variants,
        tokenizer_gguf(model_name),
        prompt=prompt,
        new_tokens=new_tokens,
        verses=verses,
        threads=sorted({1, usable_cores()}),
        repeats=repeats,
        keep=keep,
        out_dir=results_dir(profile),
    )
