"""§4.3, what removing heads buys in speed (Table 4): a classifier pruned by importance, timed
against the original and the gated model at several batch sizes (medians of timed passes after
warm-up, ``sweeps.throughput.compare_speed``), beside the FLOP prediction and the paper."""

from __future__ import annotations

import copy

import pandas as pd

from ...heads.gates import HeadGates
from ...heads.pruning import count_parameters, prune_heads
from ...heads.sites import attention_sites
from ...sweeps.pruning_curves import heads_of, order_by_importance, spec_of
from ...sweeps.throughput import compare_speed, device_name, speed_gains
from ..paper import values as paper_values


def prune_least_important(model, importance, share: float):
    """``(pruned copy, removed spec)``: the ``share`` of all heads with the lowest I_h removed."""
    pool = heads_of(model)
    removed = spec_of(order_by_importance(importance, pool)[: round(share * len(pool))])
    pruned = copy.deepcopy(model)
    prune_heads(pruned, removed)
    return pruned, removed


def sizes(model, pruned, removed, score) -> pd.DataFrame:
    """Heads, parameters and ``score`` of the original, the pruned and the gated model."""
    with HeadGates(model) as gates:
        gates.mask(removed)
        gated = score(model)
    heads = len(heads_of(model))
    return pd.DataFrame(
        [
            {"model": "original", "heads": heads, "parameters": count_parameters(model), "accuracy": score(model)},
            {
                "model": "pruned",
                "heads": sum(s.num_heads for s in attention_sites(pruned)),
                "parameters": count_parameters(pruned),
                "accuracy": score(pruned),
            },
            {"model": "gated", "heads": heads, "parameters": count_parameters(model), "accuracy": gated},
        ]
    )


def rates_table(speed: pd.DataFrame) -> pd.DataFrame:
    """Examples per second by batch size: the median of the timed passes with its interquartile
    range, each variant's gain over the original, and the gain the removed FLOPs predict."""
    table = {}
    for size, part in speed.groupby("batch_size"):
        base = part.loc[part["variant"] == "original", "median"].iloc[0]
        table[size] = {
            row["variant"]: f"{row['median']:.1f} (IQR {row['iqr']:.1f})"
            + ("" if row["variant"] == "original" else f" ({row['median'] / base - 1:+.1%})")
            for _, row in part.iterrows()
        }
        flops = part.set_index("variant")["flops"]
        table[size]["predicted by FLOPs"] = f"{flops['original'] / flops['pruned'] - 1:+.1%}"
    return pd.DataFrame(table).rename_axis(columns="batch size")


def paper_table() -> pd.DataFrame:
    """The paper's Table 4: examples per second, original and with 50% of the heads pruned."""
    paper = paper_values.TABLE4_THROUGHPUT
    return pd.DataFrame(
        {
            size: [
                f"{paper['original'][size][0]:.1f} ± {paper['original'][size][1]:.1f}",
                f"{paper['pruned'][size][0]:.1f} ± {paper['pruned'][size][1]:.1f} ({gain:+.1%})",
            ]
            for size, gain in paper_values.TABLE4_SPEEDUP.items()
        },
        index=["original", "pruned (50%)"],
    ).rename_axis(columns="batch size")


def gains_table(speed: pd.DataFrame, batch_sizes: list[int]) -> pd.DataFrame:
    """The speed-ups (ratios of median rates) measured and predicted, with the paper's, by batch size."""
    gains = speed_gains(speed).set_index("batch_size")
    return pd.DataFrame(
        {
            "pruned, measured": gains["pruned"],
            "gated, measured": gains["gated"],
            "pruned, predicted by FLOPs": gains["predicted"],
            "paper, measured": pd.Series(paper_values.TABLE4_SPEEDUP),
        }
    ).reindex(batch_sizes)


def precision_table(precision: pd.DataFrame) -> pd.DataFrame:
    """The speed-ups by dtype, compile mode and batch size, with the original's rate."""
    rates = precision.pivot_table(
        index=["dtype", "compile_mode", "batch_size"], columns="variant", values="median", sort=False
    )
    by_dtype = speed_gains(precision).set_index(["dtype", "compile_mode", "batch_size"])
    by_dtype.insert(0, "original ex/s", rates["original"])
    return by_dtype


def precision_timings(
    model,
    pruned,
    removed,
    batches_by_size: dict,
    dtypes: list[str],
    compile_modes: list[str],
    backend: str,
    repeats: int,
) -> pd.DataFrame:
    """``compare_speed`` of the three variants at each dtype and compile mode (``batches_by_size``:
    ``{batch size: [encoded batch, ...]}``), stacked, with the device's name."""
    from tqdm.auto import tqdm

    timings = [
        compare_speed(
            model,
            pruned,
            removed,
            batches_by_size,
            lambda m, b: m(**b).logits,
            repeats=repeats,
            dtype=dtype,
            compile_mode=mode,
            backend=backend,
            progress=False,
        )
        for mode in compile_modes
        for dtype in tqdm(dtypes, desc=f"dtypes ({mode})")
    ]
    return pd.concat(timings, ignore_index=True).assign(device=device_name())


def styled_precision_table(precision: pd.DataFrame):
    """``precision_table`` with rates to one decimal and gains as signed percentages."""
    return precision_table(precision).style.format(
        {
            "original ex/s": "{:.1f}",
            "pruned": "{:+.1%}",
            "gated": "{:+.1%}",
            "predicted": "{:+.1%}",
            "share_of_predicted": "{:.0%}",
        }
    )


def gains_figure(gains: pd.DataFrame, batch_sizes: list[int], title: str):
    """The speed-ups of ``gains_table`` in percent against the batch size (log scale). Returns the axes."""
    ax = (gains * 100).plot(marker="o", figsize=(7, 4))
    ax.axhline(0, color="grey", linewidth=1)
    ax.set(
        xscale="log",
        xticks=batch_sizes,
        xticklabels=batch_sizes,
        xlabel="batch size",
        ylabel="speed-up over the original (%)",
        title=title,
    )
    return ax
