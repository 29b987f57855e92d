"""Chapter 13, what removing heads buys: the rules that judge its claims and its findings in words.

Chapter 13's claims, beyond the paper: removing KV groups shrinks the cache at a small
perplexity cost, and speeds generation up in a serving runtime (llama.cpp). The rules read
``13_memory`` and ``13_runtime_speed``; what the same pruning breaks is chapter 13b's
(``ch13b``).

``findings``: chapter 13's "What this run shows" paragraph: what removing heads buys.
"""

from __future__ import annotations

import pandas as pd

from ..store.results import ChapterTables
from ..verdicts.engine import (
    CANNOT_TELL,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    Claim,
    Results,
    present,
    three_way,
)
from ..verdicts.text import percent, words

CHAPTER = "13_what_removing_heads_buys"
_PERPLEXITY_COST = 0.10  # "at a small perplexity cost": at most 10% above the unpruned model's
_PROPORTION_SHARE = 0.5  # "in proportion": at least half the speedup a cache-proportional time would give
_GENERATED = "generated tokens per second"  # the speed the serving claim reads (served.speed_summary's column)


def kv_groups_buy_memory(r: Results) -> tuple[str, str]:
    """Read on the cache that generation left (``KV bytes, measured``), per batch size, against the
    unpruned model's at the same batch: the bytes must equal the pruned layers' prediction and
    shrink by the share of groups removed (less 5 points); then perplexity decides between
    reproduced and partly. A cache that does not shrink, or not as predicted, is not reproduced."""
    table = r["13_memory"]
    f32 = table[table["dtype"] == "float32"]
    base = present(f32[f32["unit"] == "unpruned"], "13_memory: unpruned").set_index("batch")
    groups = present(f32[f32["unit"] == "KV groups"], "13_memory: KV groups")
    share = groups["share"].min()
    rows = groups[groups["share"] == share].set_index("batch")
    measured = rows["KV bytes, measured"]
    saved = 1 - measured / base.loc[rows.index, "KV bytes, measured"]
    as_predicted = bool((measured == rows["KV bytes, predicted"]).all())
    cost = rows["perplexity"].iloc[0] / base["perplexity"].iloc[0] - 1
    text = (
        f"{share:.0%} of the KV groups: {saved.min():.1%} of the measured cache saved"
        f"{'' if saved.nunique() == 1 else f' (at least; {len(saved)} batch sizes)'}, "
        f"{'as predicted' if as_predicted else 'not the predicted bytes'}; perplexity {cost:+.1%}"
    )
    follows = as_predicted and bool((saved >= share - 0.05).all())
    return text, REPRODUCED if follows and cost <= _PERPLEXITY_COST else PARTLY if follows else NOT_REPRODUCED


def _served_gains(summary: pd.DataFrame, unit: str) -> pd.DataFrame:
    """Per share of ``unit`` and thread count, from ``served.speed_summary``: llama.cpp's median
    generation speed against the unpruned file's (``gain``, as a fraction), the larger timing
    spread of the two (IQR / median over the repeats), and the gain a time proportional to the
    cache left would give, 1 / (1 - share) - 1."""
    base = present(summary[summary["unit"] == "unpruned"], "13_runtime_speed: unpruned").set_index("threads")
    rows = summary[summary["unit"] == unit].copy()
    rows["gain"] = rows[f"{_GENERATED}, ratio"] - 1
    rows["noise"] = [
        max(spread, base.loc[t, f"{_GENERATED}, spread"])
        for spread, t in zip(rows[f"{_GENERATED}, spread"], rows["threads"])
    ]
    rows["proportional"] = 1 / (1 - rows["share"]) - 1
    return rows[["share", "threads", "gain", "noise", "proportional"]]


def _serving_threads(summary: pd.DataFrame) -> int:
    """The thread count a server of the unpruned file would be run with: the one at which it
    generates fastest (more threads than free cores slow generation down)."""
    return int(summary[summary["unit"] == "unpruned"].set_index("threads")[_GENERATED].idxmax())


def served_speedup(r: Results) -> tuple[str, str]:
    """At the thread count a server would use (``_serving_threads``; the others are shown, not
    judged), every share of KV groups removed must generate faster than the unpruned file beyond
    the timing noise; "reproduced" when each gain is also at least
    ``_PROPORTION_SHARE`` of the cache-proportional gain, "partly" when it is not. Where a gain is
    not beyond the noise: "not reproduced" if some share is slower beyond the noise, else "cannot
    tell". The same share of query heads removed (which keeps more of the cache) is shown beside
    each gain: what removing heads buys without shrinking the cache as much."""
    from ..experiments.served import speed_summary

    summary = speed_summary(r["13_runtime_speed"])
    present(summary[summary["unit"] == "KV groups"], "13_runtime_speed: KV groups")
    every = _served_gains(summary, "KV groups")
    control = _served_gains(summary, "query heads").set_index(["share", "threads"])["gain"]
    judged = _serving_threads(summary)
    text = "; ".join(
        f"{share:.0%} of the KV groups, {int(t)} thread{'s' if t > 1 else ''}"
        f"{' (judged)' if t == judged else ''}: generation {gain:+.0%} "
        f"(noise {noise:.0%}; in proportion to the cache {prop:+.0%}; the same share of query heads "
        f"{control.get((share, t), float('nan')):+.0%})"
        for share, t, gain, noise, prop in every.itertuples(index=False)
    )
    gains = every[every["threads"] == judged]
    faster = bool((gains["gain"] > gains["noise"]).all())
    if not faster:  # slower beyond the noise somewhere refutes the claim; a change within it is undetermined
        return text, NOT_REPRODUCED if bool((gains["gain"] < -gains["noise"]).any()) else CANNOT_TELL
    return text, three_way(bool((gains["gain"] >= _PROPORTION_SHARE * gains["proportional"]).all()), True)


def _served_sample(r: Results) -> str:
    speed = r["13_runtime_speed"]
    runs = speed.groupby(["unit", "share", "threads"]).size().min()
    return (
        f"{runs} timed llama.cpp runs per file and thread count (after a warm-up), median; "
        f"float16 files, llama.cpp's default settings"
    )


def _memory_sample(r: Results) -> str:
    table = r["13_memory"]
    batches = ", ".join(str(int(b)) for b in sorted(table["batch"].unique()))
    verses = f"perplexity on {int(table['perplexity verses'].iloc[0])} verses" if "perplexity verses" in table else ""
    return f"the cache counted to the byte at batch {batches}" + (f"; {verses}" if verses else "")


CLAIMS = [
    Claim(
        "kv_groups_buy_memory",
        "Beyond the paper, KV cache",
        "Removing KV groups by importance shrinks the KV cache in proportion, at a small perplexity cost",
        "1.67x less memory for GQA models (DuoAttention), heads chosen for it",
        f"reproduced: at the smallest share of KV groups removed, the cache generation leaves (measured, "
        f"at every batch size) holds the predicted bytes and shrinks by at least that share (less 5 points), "
        f"with perplexity at most {_PERPLEXITY_COST:.0%} higher; partly: the cache shrinks so, perplexity rises "
        "more; not reproduced: it shrinks less, or not as predicted",
        CHAPTER,
        kv_groups_buy_memory,
        measured_on="KV bytes and perplexity on verses",
        sample=_memory_sample,
    ),
    Claim(
        "served_speedup",
        "Beyond the paper, serving",
        "Removing KV groups speeds generation up in a serving runtime, in proportion to the cache it removes",
        "uneven per-layer heads do not load in serving runtimes "
        "(pruning tools' issue trackers); §4.3 measures speed in the training framework only",
        "reproduced: at every share of KV groups removed, llama.cpp generates faster than the unpruned file beyond "
        f"the timing noise, by at least {_PROPORTION_SHARE:.0%} of the gain a time proportional to the cache left "
        "would give (1 / (1 - share) - 1); partly: faster beyond the noise, by less; not reproduced: slower beyond "
        "the noise somewhere; cannot tell: a change within the noise; timed at the thread count where the unpruned "
        "file generates fastest (the others shown), the noise being the larger IQR / median of the two",
        CHAPTER,
        served_speedup,
        measured_on="generation speed in llama.cpp",
        sample=_served_sample,
    ),
]


def memory_lines(tables: ChapterTables) -> list[str]:
    """Per level: KV bytes saved and the perplexity paid, by KV groups and by query heads."""
    table = tables["13_memory"]
    f32 = table[table["dtype"] == "float32"]
    differ = int((table["KV bytes, predicted"] != table["KV bytes, measured"]).sum())
    lines = [
        f"**Measured against predicted:** the cache tensors generation left hold exactly the bytes the pruned "
        f"layers predict in {len(table) - differ} of {len(table)} rows (levels, units, dtypes and batch sizes)"
        + ("." if not differ else f"; {differ} differ, which the prediction's arithmetic does not explain.")
    ]
    base = f32[f32["unit"] == "unpruned"].iloc[0]
    base_speed = f32[f32["unit"] == "unpruned"].set_index("batch")["tokens per second"]
    for share, part in f32[f32["unit"] != "unpruned"].groupby("share", sort=True):
        parts = []
        for unit, rows in part.groupby("unit", sort=False):
            row = rows.iloc[0]
            saved = 1 - row["KV bytes per token"] / base["KV bytes per token"]
            speed = words(
                [
                    f"{r['tokens per second'] / base_speed[r['batch']]:.2f}x at batch {int(r['batch'])}"
                    for _, r in rows.sort_values("batch").iterrows()
                ]
            )
            parts.append(
                f"* Removing {percent(share)} of the {unit} saves {percent(saved)} of the KV cache "
                f"({int(base['KV bytes per token']):,} -> {int(row['KV bytes per token']):,} bytes per token). "
                f"The perplexity is {row['perplexity']:.1f} (unpruned {base['perplexity']:.1f}), and generation "
                f"runs {speed}."
            )
        lines.append(f"**{percent(share)} removed.**\n\n" + "\n".join(parts))
    return lines


def _kept_lines(tables: ChapterTables) -> list[str]:
    """The pruned model saved, rebuilt in a fresh process and generating."""
    row = tables["13_kept_model"].iloc[0]
    same = "the same tokens" if bool(row["same tokens"]) else "**different tokens**"
    return [
        f"**A pruned model to keep:** saved in {row['megabytes saved']:.0f} MB and rebuilt in a fresh process from "
        f"those files alone, it generated {same} as the model in memory (largest logit gap "
        f"{row['largest logit gap']:.1e})."
    ]


def _runtime_lines(tables: ChapterTables) -> list[str]:
    """What llama.cpp computed, allocated and how fast it ran, against transformers and the arithmetic."""

    exact = tables["13_runtime"]
    new = int(exact["new tokens"].iloc[0])

    def differing(column: str) -> str:
        rows = [
            f"{r['unit']} {percent(r['share'])} (the first {int(r[column])} equal)"
            for _, r in exact.iterrows()
            if r[column] < new
        ]
        return f"every file but {words(rows)}" if rows else "every file"

    equal, default = differing("greedy tokens equal (exact)"), differing("greedy tokens equal (default)")
    as_predicted = {
        tag: int((exact[f"KV MiB, llama.cpp ({tag})"].round(2) == exact[f"KV MiB, predicted ({tag})"].round(2)).sum())
        for tag in ("f32", "f16")
    }
    padded = exact[exact["padded heads"] > 0]
    narrower = exact[
        exact["V MiB, llama.cpp (f32)"] > exact["K MiB, llama.cpp (f32)"]
    ]  # values padded wider than keys
    lines = [
        f"**In float32 without flash attention, llama.cpp matches transformers:** the largest gap between the two "
        f"log-probabilities of a verse token is {exact['largest log-prob gap'].max():.1e} nats over "
        f"{int(exact['scored tokens'].iloc[0])} tokens of {int(exact['verses'].iloc[0])} verses, and perplexities "
        f"agree to {(exact['perplexity, llama.cpp'] / exact['perplexity, transformers'] - 1).abs().max():.1e} "
        "(relative). "
        f"Greedy decoding gives transformers' {new} new tokens on {equal}; in llama.cpp's default settings "
        f"(float16 file and cache, flash attention) on {default}.",
        f"**Its cache:** llama.cpp allocated the predicted bytes for {as_predicted['f32']} of {len(exact)} files "
        f"in the exact settings and {as_predicted['f16']} of {len(exact)} in the default ones "
        f"({exact['KV MiB, llama.cpp (f16)'].iloc[0]:.2f} MiB unpruned at {int(exact['cells'].iloc[0]):,} cells). "
        + (
            f"Without flash attention llama.cpp pads every layer's values to the widest layer's, so where layers keep "
            f"different numbers of KV groups the values shrink only to the widest layer's width (e.g. "
            f"{narrower.iloc[0]['unit']} {percent(narrower.iloc[0]['share'])}: "
            f"{narrower.iloc[0]['K MiB, llama.cpp (f32)']:.2f} "
            f"MiB of keys, {narrower.iloc[0]['V MiB, llama.cpp (f32)']:.2f} MiB of values). "
            if len(narrower)
            else ""
        )
        + (
            f"Query heads pruned unevenly were written with {words([str(int(x)) for x in padded['padded heads']])} "
            "zero heads to even out their KV groups."
            if len(padded)
            else ""
        ),
    ]
    summary = tables["13_runtime_speed_summary"]
    parts = [
        f"{r['unit']} {percent(r['share'])}, {int(r['threads'])} thread{'s' if r['threads'] > 1 else ''}: "
        f"{r['generated tokens per second']:.0f} tokens/s ({r['generated tokens per second, ratio']:.2f}x)"
        for _, r in summary.iterrows()
    ]
    lines.append(
        "**Generation speed in llama.cpp** (median of the timed runs; float16 files):\n\n"
        + "\n".join(f"* {part}" for part in parts)
    )
    base = summary[summary["unit"] == "unpruned"].set_index("threads")
    if len(base) > 1:
        one, most = base.loc[base.index.min()], base.loc[base.index.max()]
        verb = lambda a, b: "faster" if a > b else "slower"
        lines[-1] += (
            " The unpruned file generates "
            f"{verb(most['generated tokens per second'], one['generated tokens per second'])}"
            f" with {int(base.index.max())} threads than with one ({most['generated tokens per second']:.0f} against "
            f"{one['generated tokens per second']:.0f} tokens/s) and reads its prompt "
            f"{verb(most['prompt tokens per second'], one['prompt tokens per second'])} "
            f"({most['prompt tokens per second']:.0f} against {one['prompt tokens per second']:.0f} tokens/s)."
        )
    return lines


def findings(tables: ChapterTables) -> str:
    return "\n\n".join(memory_lines(tables) + _kept_lines(tables) + _runtime_lines(tables))
