"""Chapter 13's "What this run shows" paragraph: what removing heads buys (see
``helpers.book.verdicts.findings``)."""

from __future__ import annotations

from .text import read, words


def _share(x: float) -> str:
    return f"{x:.0%}"


def memory_lines(profile: str) -> list[str]:
    """Per level: KV bytes saved and the perplexity paid, by KV groups and by query heads."""
    table = read(profile, "13_memory")
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
                f"removing {_share(share)} of the {unit} saves {_share(saved)} of the KV cache "
                f"({int(base['KV bytes per token']):,} -> {int(row['KV bytes per token']):,} bytes per token) for a "
                f"perplexity of {row['perplexity']:.1f} (unpruned {base['perplexity']:.1f}); generation speed {speed}"
            )
        lines.append(f"**{_share(share)} removed:** {'; '.join(parts)}.")
    return lines


def kept_lines(profile: str) -> list[str]:
    """The pruned model saved, rebuilt in a fresh process and generating."""
    row = read(profile, "13_kept_model").iloc[0]
    same = "the same tokens" if bool(row["same tokens"]) else "**different tokens**"
    return [
        f"**A pruned model to keep:** saved in {row['megabytes saved']:.0f} MB and rebuilt in a fresh process from "
        f"those files alone, it generated {same} as the model in memory (largest logit gap "
        f"{row['largest logit gap']:.1e})."
    ]


def runtime_lines(profile: str) -> list[str]:
    """What llama.cpp computed, allocated and how fast it ran, against transformers and the arithmetic."""
    from ...experiments.served import speed_summary

    exact = read(profile, "13_runtime")
    new = int(exact["new tokens"].iloc[0])

    def differing(column: str) -> str:
        rows = [
            f"{r['unit']} {_share(r['share'])} (the first {int(r[column])} equal)"
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
            f"{narrower.iloc[0]['unit']} {_share(narrower.iloc[0]['share'])}: "
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
    summary = speed_summary(read(profile, "13_runtime_speed"))
    parts = [
        f"{r['unit']} {_share(r['share'])}, {int(r['threads'])} thread{'s' if r['threads'] > 1 else ''}: "
        f"{r['generated tokens per second']:.0f} tokens/s ({r['generated tokens per second, ratio']:.2f}x)"
        for _, r in summary.iterrows()
    ]
    lines.append(f"**Generation speed in llama.cpp** (median of the timed runs; float16 files): {'; '.join(parts)}.")
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


def findings(profile: str) -> str:
    return "\n\n".join(memory_lines(profile) + kept_lines(profile) + runtime_lines(profile))
