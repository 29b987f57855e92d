"""Chapter 11, nine heads: its experiment and its findings in words.

Beyond the paper: its questions asked of a decoder-only language model with grouped-query
attention (chapter 11), scored by perplexity on verses: one query head masked, one kept per
layer, pruning query heads and whole KV groups by importance against random orders, and the
speed of the pruned model.

The one-head and keep-one significance rows come from ``head_effects.effect_rows`` (the same
paired bootstrap as chapters 03 and 04), with each configuration's perplexity beside them.

``findings``: chapter 11's "What this run shows" paragraph.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ...base import ledger
from ...base.devices import device_of, to_device
from ...heads.gates import HeadGates, heads_of, spec_of
from ...heads.grouped_query import kv_group_heads, kv_group_importance
from ...heads.metrics import log_likelihood
from ...heads.pruning import count_parameters, prune_heads
from ...heads.removal import removal_digest
from ...heads.significance import MIN_UNITS, Bootstrap, chance_flag_rate
from ...heads.sites import attention_sites
from ...sweeps.ablation import UNMASKED, one_head_configs, single_layer_sweep
from ...sweeps.pruning_curves import counts, order_by_importance, prunable_share, random_order, score_specs
from ...sweeps.throughput import compare_speed, device_name, speed_gains
from ...zoo.causal_lm import PerplexityScorer, lm_batches, perplexity, token_nll
from ..experiments import equivalence
from ..experiments.head_effects import effect_rows
from ..store.columns import MIN_BAND_ORDERS, shown
from ..store.results import ChapterTables
from ..store.sweep_cache import SweepCache, sweep_key
from ..verdicts.text import words


def describe(model, model_name: str) -> pd.DataFrame:
    """The model's shape: layers, query and KV heads per layer, head size, parameters, device."""
    sites = attention_sites(model)
    first = sites[0]
    return pd.DataFrame(
        [
            {
                "model": model_name,
                "class": type(model).__name__,
                "layers": len(sites),
                "query heads per layer": first.total_heads,
                "KV heads per layer": first.total_kv_groups,
                "query heads per KV head": first.group_size,
                "head size": first.head_dim,
                "parameters": count_parameters(model),
                "device": device_name(device_of(model)),
            }
        ]
    )


def sets_table(model, batches: dict[str, list], texts: dict[str, list]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """``(one row per set: verses, predicted tokens, perplexity; {set: token_nll rows})``."""
    with torch.no_grad():
        stats = {split: torch.cat([token_nll(model, b) for b in bs]).numpy() for split, bs in batches.items()}
    table = pd.DataFrame(
        [
            {
                "set": split,
                "verses": len(texts[split]),
                "predicted tokens": int(s[:, 1].sum()),
                "perplexity": perplexity(s),
            }
            for split, s in stats.items()
        ]
    )
    return table, stats


def _significance(base, outs: dict, bootstrap: Bootstrap) -> dict:
    """``{config: (p_value, significant, delta_low, delta_high)}`` of each configuration's token NLL
    rows against ``base`` (the interval of the change in log-likelihood per token, in nats); the
    bootstrap resamples verses and needs its ``min_units`` of them."""
    configs = sorted(outs)
    rows = effect_rows(
        configs, base.numpy(), stats_of=lambda c: outs[c].numpy(), score=log_likelihood, bootstrap=bootstrap
    )
    return {
        c: (p, s, lo, hi)
        for c, p, s, lo, hi in zip(
            configs, rows["p_value"], rows["significant"], rows["delta_low"], rows["delta_high"]
        )
    }


def _examples(batches: Sequence[dict]) -> int:
    return sum(int(b["input_ids"].shape[0]) for b in batches)


def lm_sweep(
    model,
    batches: Sequence[dict],
    *,
    configs: Sequence,
    configs_per_pass: int,
    removal=None,
    progress: bool = True,
    cache_dir: Path | None = None,
    what: str = "head configurations",
) -> tuple[torch.Tensor, dict]:
    """``single_layer_sweep`` of ``token_nll`` rows (``[N, 2]`` float32 per configuration: summed
    NLL and predicted tokens of each text): ``(unmasked rows, {config: rows})``. With ``cache_dir``
    (``causal_lm.sweeps_dir``) each configuration's rows are kept in a sweep cache keyed by the
    batches' tokens, ``configs_per_pass`` and the removal (its kind and a digest of its reference
    outputs), so another chapter that asks for the same rows reads them."""
    inputs = [[b["input_ids"].tolist(), b["attention_mask"].tolist()] for b in batches]
    options = {"measure": "token_nll", "configs_per_pass": configs_per_pass}
    if removal is not None and not removal.zero:
        options.update(removal=removal.kind, reference=removal_digest(removal))
    cache = SweepCache(None if cache_dir is None else Path(cache_dir) / sweep_key(inputs, options), _examples(batches))
    everything = [UNMASKED, *configs]
    todo = cache.missing(everything)
    with ledger.entry(
        "teacher-forced scoring", what, model=model, examples=_examples(batches), configs=len(everything)
    ) as timed:
        timed.set_computed(len(todo))
        if todo:
            base, outs = single_layer_sweep(
                model,
                batches,
                run=token_nll,
                configs=[c for c in todo if c != UNMASKED],
                configs_per_pass=configs_per_pass,
                removal=removal,
                progress=progress,
            )
            cache.put(UNMASKED, base.tolist())
            for config, rows in outs.items():
                cache.put(config, rows.tolist())
    rows_of = lambda c: torch.tensor(cache.get(c), dtype=torch.float32)  # token_nll rows are float32
    return rows_of(UNMASKED), {c: rows_of(c) for c in configs}


def one_head_grid(
    model,
    batches: Sequence[dict],
    *,
    configs_per_pass: int,
    bootstrap: Bootstrap = Bootstrap(),
    removal=None,
    progress: bool = True,
    cache_dir: Path | None = None,
    positions: Sequence[int] | None = None,
) -> tuple[pd.DataFrame, torch.Tensor]:
    """Every query head masked alone: per head its KV group, the perplexity, its change from the
    unmasked model's (%) and the paired bootstrap's p-value; and the unmasked token NLL rows.
    ``removal``: a ``HeadRemoval`` (mean or resample ablation) instead of zeroing the head;
    ``cache_dir``: as ``lm_sweep``'s; ``positions``: score only these rows of the batches (row k
    of batch b counts after every row of the batches before it), read from the sweep over all."""
    configs = one_head_configs(model)
    what = "one query head masked" + ("" if removal is None or removal.zero else f", {removal.kind} removal")
    base, outs = lm_sweep(
        model,
        batches,
        configs=configs,
        configs_per_pass=configs_per_pass,
        removal=removal,
        progress=progress,
        cache_dir=cache_dir,
        what=what,
    )
    if positions is not None:
        at = torch.as_tensor(list(positions))
        base, outs = base[at], {c: rows[at] for c, rows in outs.items()}
    return _grid_rows(model, base, outs, bootstrap), base


def _grid_rows(model, base: torch.Tensor, outs: dict, bootstrap: Bootstrap) -> pd.DataFrame:
    first = attention_sites(model)[0]
    tests = _significance(base, outs, bootstrap)
    base_ppl = perplexity(base)
    # in the configurations' order (layer, then head): the sweep's processes may finish in any order
    rows = [
        {
            "layer": layer,
            "head": heads[0],
            "kv_group": first.kv_group(heads[0]),
            "perplexity": perplexity(outs[c]),
            "change_pct": 100 * (perplexity(outs[c]) / base_ppl - 1),
            "p_value": tests[c][0],
            "significant": tests[c][1],
            "delta_low": tests[c][2],
            "delta_high": tests[c][3],
        }
        for c in one_head_configs(model)
        for _, layer, heads in [c]
    ]
    return pd.DataFrame(rows)


NULL_DRAWS = 10  # null samples drawn per head for the grid's calibration (and as many again to check it)


def calibrated_grid(
    model,
    batches: Sequence[dict],
    *,
    configs_per_pass: int,
    bootstrap: Bootstrap = Bootstrap(),
    draws: int = NULL_DRAWS,
    progress: bool = True,
    cache_dir: Path | None = None,
) -> tuple[pd.DataFrame, torch.Tensor, pd.DataFrame]:
    """``one_head_grid`` tested at the level that holds its rate on these verses: ``(grid, unmasked
    token NLL rows, null rates)``. Every head's per-verse changes are centred so that it truly
    changes nothing, and ``draws`` samples of as many verses as the grid has are drawn from each
    and tested (``significance.null_p_values``): the level at which those null tests flag chance's
    share (``calibrated_level``, never above alpha) is fitted on one set of draws and checked on a
    fresh one. The grid is the bootstrap at that level (``significant``: p < level; the interval
    ``delta_low``, ``delta_high`` at its quantiles, which the equivalence classes read), with
    ``level`` and ``significant at nominal alpha`` beside it (p-values do not depend on the
    level). The table: one row per level (nominal, calibrated) with the share of the fresh null
    tests it flags, chance's share and the tests run."""
    from ...heads.significance import calibrated_level, null_p_values

    base, outs = lm_sweep(
        model,
        batches,
        configs=one_head_configs(model),
        configs_per_pass=configs_per_pass,
        removal=None,
        progress=progress,
        cache_dir=cache_dir,
        what="one query head masked",
    )
    pairs = [(base.numpy(), outs[c].numpy()) for c in sorted(outs)]
    n, alpha = len(base), bootstrap.alpha
    fitted = null_p_values(pairs, n, draws=draws, n_resamples=bootstrap.n_resamples, seed=bootstrap.seed + 1)
    fresh = null_p_values(pairs, n, draws=draws, n_resamples=bootstrap.n_resamples, seed=bootstrap.seed + 2)
    level = calibrated_level(fitted, alpha)
    rates = pd.DataFrame(
        [
            {
                "level": name,
                "alpha": a,
                "verses": n,
                "nominal": chance_flag_rate(alpha),
                "flagged with no effect": float(np.mean(fresh < a)),
                "tests": len(fresh),
            }
            for name, a in (("nominal", alpha), ("calibrated", level))
        ]
    )
    grid = _grid_rows(model, base, outs, bootstrap.at(level))
    grid.insert(grid.columns.get_loc("significant") + 1, "significant at nominal alpha", grid["p_value"] < alpha)
    return grid.assign(level=level), base, rates


def grid_counts(grid: pd.DataFrame, alpha: float, margins: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The one-head grid's headline: the level it was tested at (``calibrated_grid``'s; ``alpha``
    for a grid without one), significantly worse and better, beside chance, within 1%; and each
    equivalence class against ``margins["perplexity"]`` (a share of the perplexity: log(1 + share)
    nats per token), with the heads neither test places (``unplaced``). At a level of 0 no head
    can be significant, and none is counted harmful or helpful either: an interval wholly beyond
    a margin asserts a change as a significant test does, so those heads count as undetermined."""
    worse = grid[grid["significant"] & (grid["change_pct"] > 0)]
    better = grid[grid["significant"] & (grid["change_pct"] < 0)]
    delta = equivalence.margin("language model", "likelihood", margins or {})
    placed = equivalence.placement(grid, delta)
    level = float(grid["level"].iloc[0]) if "level" in grid else alpha
    if level == 0:  # no head can be called significant: none is shown beyond a margin either (both assert a change)
        beyond = placed["harmful"] + placed["helpful"]
        placed.update(harmful=0, helpful=0, undetermined=placed["undetermined"] + beyond)
        placed["unplaced"] += beyond
    return pd.DataFrame(
        [
            {
                "heads": len(grid),
                "level": level,
                "significantly worse": len(worse),
                "significantly better": len(better),
                "expected by chance": chance_flag_rate(alpha) * len(grid),
                "expected by chance each way": chance_flag_rate(alpha, one_direction=True) * len(grid),
                "within 1% of the unmasked perplexity": int((grid["change_pct"].abs() < 1).sum()),
                "largest rise (%)": grid["change_pct"].max(),
                "margin (nats)": delta,
                **placed,
            }
        ]
    )


def keep_one_head(
    model, grid: pd.DataFrame, *, batches: Sequence[dict], configs_per_pass: int, bootstrap: Bootstrap = Bootstrap()
) -> tuple[pd.DataFrame, float]:
    """Each layer down to the head whose removal hurt most in ``grid`` (chosen on the select set),
    reported on ``batches``: ``(one row per layer, the unmasked perplexity on them)``."""
    sites = attention_sites(model)
    kept = grid.loc[grid.groupby("layer")["change_pct"].idxmax(), ["layer", "head"]].set_index("layer")["head"]
    configs = [("self", int(layer), tuple(h for h in sites[layer].heads if h != head)) for layer, head in kept.items()]
    with ledger.entry(
        "teacher-forced scoring",
        "one head kept per layer",
        model=model,
        examples=_examples(batches),
        configs=len(configs) + 1,
    ):
        base, outs = single_layer_sweep(
            model, batches, run=token_nll, configs=configs, configs_per_pass=configs_per_pass
        )
    tests = _significance(base, outs, bootstrap)
    base_ppl = perplexity(base)
    rows = [
        {
            "layer": layer,
            "kept head": int(kept[layer]),
            "perplexity": perplexity(outs[c]),
            "change_pct": 100 * (perplexity(outs[c]) / base_ppl - 1),
            "p_value": tests[c][0],
            "significant": tests[c][1],
            "delta_low": tests[c][2],
            "delta_high": tests[c][3],
        }
        for c in configs
        for _, layer, _ in [c]
    ]
    return pd.DataFrame(rows), base_ppl


def pruning_curves(
    model, importance, *, batches: Sequence[dict], random_orders: int, step: float, seed: int, configs_per_pass: int
) -> pd.DataFrame:
    """Perplexity on ``batches`` as query heads, or whole KV groups, are pruned by importance
    (a KV group's: the sum of its query heads' I_h) and in ``random_orders`` random orders; every
    curve starts with nothing masked and ends with everything masked, steps scored once."""
    sites = attention_sites(model)
    n_groups = sites[0].total_kv_groups
    group_importance = kv_group_importance(model, importance)["self"]
    pool = heads_of(model)
    groups = [(layer, g) for layer in range(len(sites)) for g in range(n_groups)]
    group_order = sorted(groups, key=lambda lg: float(group_importance[lg]))
    members = lambda chosen: [("self", layer, h) for layer, g in chosen for h in kv_group_heads(sites[layer], g)]
    plans = {
        ("query heads", "importance"): (order_by_importance(importance, pool), list),
        ("KV groups", "importance"): (group_order, members),
    }
    for r in range(random_orders):
        plans["query heads", f"random {r}"] = (random_order(pool, seed + r), list)
        plans["KV groups", f"random {r}"] = (random.Random(seed + r).sample(groups, len(groups)), members)
    steps = [
        (unit, label, len(order), c, spec_of(expand(order[:c])))
        for (unit, label), (order, expand) in plans.items()
        for c in counts(len(order), step)
    ]
    scores = score_specs(model, [spec for *_, spec in steps], evaluate=PerplexityScorer(batches, configs_per_pass))
    curves = pd.DataFrame(
        [
            {"unit": unit, "pruned": c, "share": c / n, "score": score, "order": label}
            for (unit, label, n, c, _), score in zip(steps, scores)
        ]
    )
    curves["perplexity"] = np.exp(-curves["score"])
    return curves


def prunable_shares(curves: pd.DataFrame) -> pd.DataFrame:
    """Per unit and order: the share that can go before the perplexity rises by more than 1% (the
    paper's tolerance) or 10%, and the perplexity at half pruned."""
    rows = []
    for (unit, order), part in curves.groupby(["unit", "order"], sort=False):
        part = part.sort_values("pruned")
        rows.append(
            {
                "unit": unit,
                "order": order,
                "prunable within 1%": prunable_share(part, np.log(1.01)),
                "prunable within 10%": prunable_share(part, np.log(1.10)),
                "perplexity at 50%": float(np.interp(0.5, part["share"], part["perplexity"])),
            }
        )
    return pd.DataFrame(rows)


def pruned_speed(
    model, importance, *, share: float, by_size: dict, check_batches: Sequence[dict], repeats: int
) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The least important ``share`` of query heads removed: ``(timings, speed-ups by batch size,
    a line on what is left and on the largest logit gap between the pruned and the gated model)``."""
    pool = heads_of(model)
    removed = spec_of(order_by_importance(importance, pool)[: round(share * len(pool))])
    pruned = copy.deepcopy(model)
    prune_heads(pruned, removed)
    speed = compare_speed(
        model, pruned, masked=removed, batches_by_size=by_size, forward=lambda m, b: m(**b).logits, repeats=repeats
    )
    speed = speed.assign(device=device_name(device_of(model)))  # where it ran, not where the course puts models
    with HeadGates(model) as gates, torch.no_grad():  # the pruned model computes what the gated one does
        gates.mask(removed)
        gap = max(
            float((model(**b).logits - pruned(**b).logits).abs().max())
            for b in (to_device(b, model) for b in check_batches)
        )
    gains = speed_gains(speed).set_index("batch_size")  # ratios of median rates
    gains = pd.DataFrame(
        {
            "pruned, measured": gains["pruned"],
            "gated, measured": gains["gated"],
            "pruned, predicted by FLOPs": gains["predicted"],
        }
    )
    sites, left = attention_sites(model), attention_sites(pruned)
    kv_left = sum(len(s.kv_groups) for s in left) / (len(sites) * sites[0].total_kv_groups)
    line = (
        f"{sum(s.num_heads for s in left)} of {len(pool)} query heads and {kv_left:.0%} of the KV heads left; "
        f"parameters {count_parameters(model):,} -> {count_parameters(pruned):,}; "
        f"largest logit gap, pruned vs gated model: {gap:.1e}"
    )
    return speed, gains, line


def grid_heatmap(grid: pd.DataFrame, model, model_name: str):
    """The one-head grid as a layer x query-head heatmap of the perplexity change (%), ``*`` on
    significant cells at the grid's calibrated level (named in the title beside ``model_name``),
    with a black line between KV groups. Returns the axes."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    numbered = grid.assign(layer=grid["layer"].map(shown), head=grid["head"].map(shown))  # from 1, as every page
    change = numbered.pivot(index="layer", columns="head", values="change_pct")
    marks = numbered.pivot(index="layer", columns="head", values="significant").replace({True: "*", False: ""})
    _, ax = plt.subplots(figsize=(6, max(3, 0.25 * len(change))))
    limit = max(1.0, float(np.nanpercentile(change.abs(), 98)))
    sns.heatmap(
        change,
        cmap="RdBu_r",
        center=0,
        vmin=-limit,
        vmax=limit,
        annot=marks,
        fmt="",
        ax=ax,
        cbar_kws={"label": "perplexity change when masked (%)"},
    )
    site = attention_sites(model)[0]
    for g in range(1, site.total_kv_groups):
        ax.axvline(g * site.group_size, color="black", linewidth=1)
    title = f"{model_name}: one query head masked (*: {level_text(grid['level'].iloc[0])}, calibrated)"
    ax.set(title=title, xlabel="query head (lines: KV groups)")
    return ax


def keep_one_bars(keep_one: pd.DataFrame, alpha: float, perplexity: float):
    """``keep_one_head``'s perplexity change per layer (symlog), red where significant at
    ``alpha``; the title gives the report set's unmasked ``perplexity``. Returns the axes."""
    title = f"only one head kept in the layer (red: p < {alpha}); report set, perplexity {perplexity:.1f}"
    ax = keep_one.assign(layer=keep_one["layer"].map(shown)).plot.bar(
        x="layer",
        y="change_pct",
        legend=False,
        figsize=(8, 3),
        color=["tab:red" if s else "tab:grey" for s in keep_one["significant"]],
    )
    ax.set(ylabel="perplexity change (%)", yscale="symlog", title=title)
    return ax


def curves_figure(curves: pd.DataFrame):
    """``pruning_curves``: one panel per unit (query heads, KV groups), the importance order over
    the random orders' band, perplexity on a log scale. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for ax, (unit, part) in zip(axes, curves.groupby("unit", sort=False)):
        rand = part[part["order"] != "importance"].groupby("share")["perplexity"]
        ax.fill_between(rand.min().index * 100, rand.min(), rand.max(), color="grey", alpha=0.3, label="random orders")
        imp = part[part["order"] == "importance"]
        ax.plot(imp["share"] * 100, imp["perplexity"], marker="o", label="importance order")
        ax.set(title=f"pruning {unit}", xlabel="share pruned (%)", yscale="log")
    axes[0].set_ylabel("report-set perplexity")
    axes[0].legend()
    return fig


def verse_batches(tokenizer, texts: Mapping[str, Sequence[str]], batch_size: int) -> dict[str, list[dict]]:
    """``{split: lm_batches(tokenizer, texts[split], batch_size)}`` for each verse set."""
    return {split: lm_batches(tokenizer, t, batch_size=batch_size) for split, t in texts.items()}


@dataclass(frozen=True)
class VerseSweeps:
    """Chapter 11's experiments on one causal LM and its two verse sets, with what they share set
    once: ``batches`` (``{"select": [...], "report": [...]}``, ``lm_batches``), the configurations
    scored in one pass, the bootstrap, and the sweep cache. Heads are ranked and chosen on the select
    set and scored on the report set."""

    model: torch.nn.Module
    batches: Mapping[str, Sequence[dict]]
    configs_per_pass: int
    bootstrap: Bootstrap = Bootstrap()
    cache_dir: Path | None = None

    def calibrated_grid(self, draws: int = NULL_DRAWS) -> tuple[pd.DataFrame, torch.Tensor, pd.DataFrame]:
        """``calibrated_grid`` on the select set: ``(grid, unmasked token NLL rows, null rates)``."""
        return calibrated_grid(
            self.model,
            self.batches["select"],
            configs_per_pass=self.configs_per_pass,
            bootstrap=self.bootstrap,
            draws=draws,
            cache_dir=self.cache_dir,
        )

    def importance(self) -> dict[str, torch.Tensor]:
        """Head importance I_h (``head_importance``) on the select set, with the LM's loss."""
        from ...heads.importance import head_importance
        from ...zoo.causal_lm import lm_loss

        return head_importance(self.model, self.batches["select"], loss_fn=lm_loss)

    def keep_one_head(self, grid: pd.DataFrame) -> tuple[pd.DataFrame, float]:
        """``keep_one_head``: the head ``grid`` (select set) ranks most needed, kept alone in each
        layer, scored on the report set."""
        return keep_one_head(
            self.model,
            grid,
            batches=self.batches["report"],
            configs_per_pass=self.configs_per_pass,
            bootstrap=self.bootstrap,
        )

    def pruning_curves(self, importance, random_orders: int, step: float, seed: int) -> pd.DataFrame:
        """``pruning_curves`` on the report set."""
        return pruning_curves(
            self.model,
            importance,
            batches=self.batches["report"],
            random_orders=random_orders,
            step=step,
            seed=seed,
            configs_per_pass=self.configs_per_pass,
        )

    def pruned_speed(
        self, importance, share: float, *, tokenizer, texts: Sequence[str], batch_sizes: Sequence[int], repeats: int
    ) -> tuple[pd.DataFrame, pd.DataFrame, str]:
        """``pruned_speed``, timed on ``texts`` in batches of each of ``batch_sizes``, and checked
        (pruned against gated) on the report set's first two batches."""
        by_size = {size: lm_batches(tokenizer, texts, batch_size=size) for size in batch_sizes}
        return pruned_speed(
            self.model,
            importance,
            share=share,
            by_size=by_size,
            check_batches=self.batches["report"][:2],
            repeats=repeats,
        )


def small_sample(sets) -> str:
    """A warning where the tests below run on fewer verses than the book's declared minimum: the
    run cannot decide, and the warning says why."""
    n = int(min(sets.loc["select", "verses"], sets.loc["report", "verses"]))
    if n >= MIN_UNITS:
        return ""
    return (
        f" **The tests below resample only {n} verses, under the book's minimum of {MIN_UNITS}, so this run cannot "
        "decide which heads matter.** This profile lowers `min_units` to run them. Over so few verses, a bootstrap "
        "flags far more heads with no effect than its alpha says (about a fifth over 4 verses). Read the counts as "
        "an exercise, not a finding."
    )


def _null_rate_line(tables: ChapterTables) -> list[str]:
    """Why the grid is tested at its calibrated level (``11_grid_null_rate``, ``calibrated_grid``):
    the share of no-effect heads the bootstrap flags at its nominal level and at the calibrated
    one, on fresh null draws; none for a run from before the table existed."""

    rates = tables.get("11_grid_null_rate")
    if rates is None or "level" not in rates:
        return []
    grid = tables["11_one_head_grid"]
    nominal, calibrated = (rates.set_index("level").loc[k] for k in ("nominal", "calibrated"))
    loose = int(grid["significant at nominal alpha"].sum())
    return [
        f"**The level these verses allow.** With every head's per-verse changes centred at no effect and "
        f"{int(nominal['verses'])} verses drawn from them ({int(nominal['tests']):,} tests), the bootstrap at its "
        f"nominal p < {nominal['alpha']:g} flags {nominal['flagged with no effect']:.1%} of the heads, against the "
        f"{nominal['nominal']:.0%} it promises"
        + (
            ": over so few, skewed verses it is too liberal"
            if nominal["flagged with no effect"] > nominal["nominal"]
            else ""
        )
        + f". The grid is therefore tested at {level_text(calibrated['alpha'])}, the level fitted on one set of such "
        f"draws, which flags {calibrated['flagged with no effect']:.1%} on a fresh set. At the nominal level {loose} "
        f"heads would have been called significant; at the calibrated level {int(grid['significant'].sum())} are."
    ]


def level_text(level: float) -> str:
    """The calibrated level in words; at 0, no p-value is small enough (chance's share of the
    no-effect heads already gets p = 0, as over a handful of verses)."""
    return f"p < {level:.3g}" if level > 0 else "no level at all (no head can be called significant here)"


def keep_one_summary(keep_one: pd.DataFrame) -> pd.DataFrame:
    """``keep_one_head``'s layers in one row: ``layers``, ``kept`` (no significant loss with one
    query head), the median layer's ``change_pct`` and the worst (``worst change_pct``, at
    ``worst layer``, numbered from 0 as the per-layer table is)."""
    worst = keep_one.loc[keep_one["change_pct"].idxmax()]
    return pd.DataFrame(
        [
            {
                "layers": len(keep_one),
                "kept": int((~keep_one["significant"].astype(bool)).sum()),
                "median change_pct": float(keep_one["change_pct"].median()),
                "worst change_pct": float(worst["change_pct"]),
                "worst layer": int(worst["layer"]),
            }
        ]
    )


def findings(tables: ChapterTables, speed_share: float = 0.5) -> str:
    """Chapter 11's findings (one language model, one draw of verses): the one-head grid against
    chance, the layers that keep their perplexity with one head, the prunable shares and the
    speed-up against the FLOP prediction, with ``speed_share`` of the query heads removed."""
    sets = tables["11_sets"].set_index("set")
    grid = tables["11_one_head_grid"]
    keep = tables["11_keep_one_summary"].iloc[0]
    shares = tables["11_prunable_shares"].set_index(["unit", "order"])
    gains = tables["11_speed_gains"].set_index("batch_size")
    worse = grid[grid["significant"] & (grid["change_pct"] > 0)]
    better = grid[grid["significant"] & (grid["change_pct"] < 0)]
    top = grid.loc[grid["change_pct"].idxmax()]
    counts = tables["11_one_head_counts"].iloc[0]
    at_level = f" ({level_text(grid['level'].iloc[0])}, the calibrated level below)" if "level" in grid else ""
    lines = [
        f"The model's perplexity on the verses is {sets.loc['select', 'perplexity']:.1f} (select set, "
        f"{int(sets.loc['select', 'verses'])} verses) and {sets.loc['report', 'perplexity']:.1f} (report set)."
        + small_sample(sets),
        f"**One head masked:** {len(worse)} of {len(grid)} query heads raise the perplexity significantly and "
        f"{len(better)} lower it significantly{at_level}. Chance alone would flag "
        f"{counts['expected by chance each way']:.1f} in each direction ({counts['expected by chance']:.1f} in all). "
        f"{int(counts['within 1% of the unmasked perplexity'])} change it by less than 1%. The largest rise is "
        f"{top['change_pct']:+.1f}% (layer {shown(top['layer'])}, head {shown(top['head'])}); the significant "
        "heads are in "
        f"{grid.loc[grid['significant'], 'layer'].nunique()} of the {grid['layer'].nunique()} layers."
        + (
            f" Against a margin of ±{math.expm1(counts['margin (nats)']):.0%} of perplexity, "
            f"{int(counts['negligible'])} "
            f"heads are shown negligible, {int(counts['harmful'])} harmful, {int(counts['helpful'])} helpful and "
            f"{int(counts['undetermined'])} undetermined; {int(counts['unplaced'])} are placed by neither test."
            if "negligible" in counts
            else ""
        ),
        *_null_rate_line(tables),
        f"**One head kept:** {int(keep['kept'])} of {int(keep['layers'])} layers show no significant loss with a "
        f"single query head; the median layer changes the perplexity by {keep['median change_pct']:+.0f}% and the "
        f"worst by {keep['worst change_pct']:+.0f}% (layer {shown(int(keep['worst layer']))}).",
    ]
    for unit in ("query heads", "KV groups"):
        imp = shares.loc[(unit, "importance")]
        rand = shares.loc[unit].drop("importance")
        lines.append(
            f"**Pruning {unit} by importance:** {imp['prunable within 1%']:.0%} can go with the perplexity within "
            f"1% of the unpruned model's and {imp['prunable within 10%']:.0%} within 10%; at half pruned the "
            f"perplexity is {imp['perplexity at 50%']:.1f}, against "
            + words([f"{v:.1f}" for v in rand["perplexity at 50%"]])
            + f" for {len(rand)} random order{'s' if len(rand) > 1 else ''}"
            + (" (too few for a band)." if len(rand) < MIN_BAND_ORDERS else ".")
        )
    big, small = gains.index.max(), gains.index.min()
    lines.append(
        f"**Speed:** with the least important {speed_share:.0%} of the query heads removed, the model is "
        f"{gains.loc[big, 'pruned']:+.1%} faster at batch {big} ({gains.loc[big, 'share_of_predicted']:.0%} of the "
        f"{gains.loc[big, 'predicted']:+.1%} its FLOPs predict) and {gains.loc[small, 'pruned']:+.1%} at batch "
        f"{small}; the gated model runs {gains.loc[small, 'gated']:+.1%} and {gains.loc[big, 'gated']:+.1%} "
        "against the original (medians of the timed passes)."
    )
    return "\n\n".join(lines)
