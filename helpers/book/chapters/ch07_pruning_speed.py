"""Chapter 07, pruning speed: its experiment, the rules that judge its claims and its findings in words.

§4.3, what removing heads buys in speed (Table 4): a classifier pruned by importance, timed
against the original and the gated model at several batch sizes (medians of timed passes after
warm-up, ``sweeps.throughput.compare_speed``), beside the FLOP prediction and the paper.

Chapter 07's claims (§4.3, Table 4): removing half the heads speeds inference up at large
batches, hardly at batch 1. The rules read ``07_speed``.

``findings``: chapter 07's "What this run shows" paragraph.
"""

from __future__ import annotations

import copy

import pandas as pd

from ...base.devices import device_of
from ...heads.gates import HeadGates, heads_of, spec_of
from ...heads.pruning import count_parameters, prune_heads
from ...heads.sites import attention_sites
from ...sweeps.pruning_curves import order_by_importance
from ...sweeps.throughput import compare_speed, device_name, speed_gains
from ..paper import values as paper_values
from ..store.results import ChapterTables, MissingTable
from ..verdicts import samples
from ..verdicts.engine import CANNOT_TELL, NOT_REPRODUCED, Claim, Results, three_way


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


def _precision_table(precision: pd.DataFrame) -> pd.DataFrame:
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
    *,
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
            masked=removed,
            batches_by_size=batches_by_size,
            forward=lambda m, b: m(**b).logits,
            repeats=repeats,
            dtype=dtype,
            compile_mode=mode,
            backend=backend,
            progress=False,
        )
        for mode in compile_modes
        for dtype in tqdm(dtypes, desc=f"dtypes ({mode})")
    ]
    return pd.concat(timings, ignore_index=True).assign(device=device_name(device_of(model)))


def styled_precision_table(precision: pd.DataFrame):
    """``_precision_table`` with rates to one decimal and gains as signed percentages."""
    return _precision_table(precision).style.format(
        {
            "original ex/s": "{:.1f}",
            "pruned": "{:+.1%}",
            "gated": "{:+.1%}",
            "predicted": "{:+.1%}",
            "share_of_predicted": "{:.0%}",
        }
    )


def gains_figure(gains: pd.DataFrame, batch_sizes: list[int], *, share: float, profile: str):
    """The speed-ups of ``gains_table`` in percent against the batch size (log scale), titled with
    the ``share`` of heads removed, the profile and the device. Returns the axes."""
    title = f"removing {share:.0%} of the heads ({profile} profile, {device_name()})"
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


CHAPTER = "07_pruning_speed"


def _gains(tables: Results | ChapterTables) -> pd.DataFrame:
    """``07_speed_gains`` by batch size: the pruned model's speed-up and the timing noise."""
    gains = tables["07_speed_gains"].set_index("batch_size").sort_index()
    return gains.assign(noise=gains["noise"].fillna(0.0) if "noise" in gains else 0.0)


def _batch_gap(small: pd.Series, large: pd.Series) -> tuple[float, float]:
    """``(gap, noise)``: the largest batch's speed-up less the smallest's, and the larger timing
    noise of the two."""
    return float(large["pruned"] - small["pruned"]), float(max(small["noise"], large["noise"]))


def _beyond_noise(change: float, noise: float) -> str | None:
    """``None`` where ``change`` (a speed-up, or a difference of two) is beyond the timing
    ``noise`` either way; ``cannot tell`` within it."""
    return None if abs(change) > noise else CANNOT_TELL


def speedup_large(r: Results) -> tuple[str, str]:
    gains = _gains(r)
    paper, large = paper_values.TABLE4_SPEEDUP[64], gains.iloc[-1]
    gain, noise = float(large["pruned"]), float(large["noise"])
    text = f"{gain:+.1%} at batch {gains.index[-1]} (noise {noise:.1%}; {r['07_speed']['device'].iloc[0]})"
    verdict = _beyond_noise(gain, noise) or (
        NOT_REPRODUCED if gain < 0 else three_way(abs(gain - paper) <= paper / 2, True)
    )
    return text, verdict


def speedup_small(r: Results) -> tuple[str, str]:
    gains = _gains(r)
    small, large = gains.iloc[0], gains.iloc[-1]
    gap, noise = _batch_gap(small, large)
    text = (
        f"{small['pruned']:+.1%} at batch {gains.index[0]}, {large['pruned']:+.1%} at {gains.index[-1]} "
        f"(noise {noise:.1%})"
    )
    verdict = _beyond_noise(gap, noise) or (
        NOT_REPRODUCED if gap < 0 else three_way(small["pruned"] < paper_values.TABLE4_SPEEDUP[64] / 2, True)
    )
    return text, verdict


def _speed_sample(r: Results) -> str:
    return samples.timing(r["07_speed"])


CLAIMS = [
    Claim(
        "speedup_large",
        "§4.3, Table 4",
        "Removing half the heads speeds inference up at large batches",
        f"{paper_values.TABLE4_SPEEDUP[64]:+.1%} at batch 64 (GTX 1080Ti)",
        "reproduced: the largest batch's gain beyond the timing noise and within half of the paper's gain "
        "either way; partly: faster beyond the noise; not reproduced: slower beyond the noise; cannot tell: a "
        "change within the noise (the larger IQR / median of the original and the gated model)",
        CHAPTER,
        speedup_large,
        sample=_speed_sample,
    ),
    Claim(
        "speedup_small",
        "§4.3, Table 4",
        "At batch size 1 there is almost no gain",
        f"{paper_values.TABLE4_SPEEDUP[1]:+.1%} at batch 1",
        "reproduced: batch 1 gains less than the largest batch, by more than the timing noise of either, and "
        "under half the paper's large-batch gain; partly: less than the largest batch beyond the noise; not "
        "reproduced: more than the largest batch beyond the noise; cannot tell: the two within the noise",
        CHAPTER,
        speedup_small,
        sample=_speed_sample,
    ),
]


def _against_largest(small: pd.Series, large: pd.Series) -> str:
    """The batch-1 gain set against the largest batch's, as ``speedup_small`` reads them."""
    gap, noise = _batch_gap(small, large)
    if _beyond_noise(gap, noise) == CANNOT_TELL:
        return f"within the timing noise ({noise:.1%}) of the largest batch's. "
    side = "less" if gap > 0 else "more"
    return f"{side} than at the largest batch, beyond the timing noise ({noise:.1%}). "


def findings(tables: ChapterTables) -> str:
    """Chapter 07's findings: the measured speed-ups (ratios of median rates) at each batch size
    against the FLOP prediction and the paper's, the gated model against the timing noise, and
    the precision table's rows."""
    from ..paper.values import TABLE4_SPEEDUP

    gains = _gains(tables)
    sizes = list(gains.index)
    small, large = sizes[0], sizes[-1]
    g = gains.loc[large]
    noise = g["noise"]
    text = (
        f"On {tables['07_speed']['device'].iloc[0]}, removing the heads made the classifier {g['pruned']:+.1%} "
        f"faster at batch {large} (median of the timed passes), against {g['predicted']:+.1%} predicted by the "
        f"removed FLOPs ({g['share_of_predicted']:.0%} of the prediction realised) and the paper's "
        f"{TABLE4_SPEEDUP[64]:+.1%} at 64 on a GPU. At batch {small} it gained {gains.loc[small, 'pruned']:+.1%} "
        f"(the paper: {TABLE4_SPEEDUP[1]:+.1%} at batch 1), "
        + _against_largest(gains.loc[small], g)
        + f"The gated model ran {g['gated']:+.1%} against the original at batch {large}, with a timing noise "
        f"(interquartile range over median) of {noise:.1%}: "
        + (
            "masking saves nothing beyond the noise, as masking should."
            if g["gated"] <= noise
            else "faster than the noise alone explains, which the timing should be checked for."
        )
    )
    try:
        precision = tables["07_precision_gains"]
    except MissingTable:
        return text
    rows = [
        f"- {r.dtype} {r.compile_mode} at batch {r.batch_size}: {r.pruned:+.1%} (predicted {r.predicted:+.1%})"
        for r in precision.itertuples()
    ]
    return text + "\n\nThe pruned model's speed-up in the precision table:\n\n" + "\n".join(rows)
