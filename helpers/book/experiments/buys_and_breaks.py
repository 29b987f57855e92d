"""What removing heads buys and breaks in a modern LM (SmolLM2): the KV cache and cached
generation at a few pruning levels (chapter 13), and the induction heads that in-context copying
needs (chapter 13b).

    variants = pruned_variants(model, importance, (0, 1/3, 2/3))       # KV groups and query heads
    generation = Generation.from_verses(
        tokenizer, texts, prompt_tokens=256, batch_sizes=[1, 8], new_tokens=64, repeats=3
    )
    table = generation.memory_and_speed(variants, report, ["float32"])  # bytes, tokens/s, perplexity
    heads = induction_ranks(model, probe, {"I_h on verses": imp_v, "I_h on copying": imp_c}, grid)
    curves = copying_curves(model, orders, verse_batches=verses, probe=probe, step=step)  # verses and copying
    exact, speed = generation.served_by_llama_cpp(variants, "smollm2", texts, profile)  # served.py
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from ...base.devices import device_of, to_device
from ...heads.gates import heads_in, heads_of, spec_of
from ...heads.grouped_query import kv_group_heads, kv_group_order
from ...heads.metrics import log_likelihood
from ...heads.pruning import count_parameters, prune_heads
from ...heads.significance import MIN_UNITS, resample_indices, resampled_sums
from ...heads.sites import attention_sites
from ...kv.cache import (
    PublishedModel,
    cache_bytes,
    generate_cached,
    generation_seconds,
    kv_bytes,
    kv_bytes_per_token,
    published_kv_table,
)
from ...probes.induction import copying_stats, induction_scores, repeated_tokens
from ...sweeps.pruning_curves import counts, order_by_importance, random_order, score_specs
from ...zoo.causal_lm import PerplexityScorer
from ..store.columns import (
    BAND,
    COPYING_KEPT,
    COPYING_TOLERANCES,
    INDUCTION_TOP,
    UNPRUNED_COPYING,
    VERDICT_SEQUENCES,
    copying_at,
    copying_below,
    copying_kept_interval,
    prunable_within,
    random_copying_at,
    random_orders_at,
)
from .served import RUNTIME_SHOWN, served_by_llama_cpp, speed_summary  # noqa: F401 (chapter 13's llama.cpp section)

LEVELS = (0.0, 1 / 3, 2 / 3)
UNITS = ("KV groups", "query heads")
MEMORY_SHOWN = [
    "unit",
    "share",
    "dtype",
    "batch",
    "query heads",
    "KV heads",
    "KV bytes per token",
    "KV bytes, predicted",
    "KV bytes, measured",
    "tokens per second",
    "perplexity",
]  # the columns chapter 13 shows


# ---- pruned variants ---------------------------------------------------------------------------
def pruned_variants(
    model: nn.Module,
    importance: Mapping[str, torch.Tensor],
    shares: Sequence[float] = LEVELS,
    units: Sequence[str] = UNITS,
) -> dict[tuple[str, float], nn.Module]:
    """``{(unit, share): model}``: copies of ``model`` with the least important ``share`` of its KV
    groups (every query head of each) or of its query heads physically removed, for each of
    ``units``; share 0 is the model itself, once, under the unit "unpruned"."""
    sites = attention_sites(model)
    groups, heads = kv_group_order(model, importance), order_by_importance(importance, heads_of(model))
    out: dict[tuple[str, float], nn.Module] = {}
    for share in shares:
        if share == 0:
            out["unpruned", 0.0] = model
            continue
        by_groups = [
            ("self", layer, h)
            for layer, g in groups[: round(share * len(groups))]
            for h in kv_group_heads(sites[layer], g)
        ]
        for unit, chosen in (("KV groups", by_groups), ("query heads", heads[: round(share * len(heads))])):
            if unit not in units:
                continue
            pruned = copy.deepcopy(model)
            prune_heads(pruned, spec_of(chosen))
            out[unit, share] = pruned
    return out


def prompt_ids(tokenizer, texts: Sequence[str], tokens: int, batch: int) -> torch.Tensor:
    """``[batch, tokens]`` prompts, each row its own run of consecutive ``texts`` joined by
    spaces and cut at ``tokens`` tokens (no padding: every row is full)."""
    rows, start = [], 0
    for _ in range(batch):
        ids: list[int] = []
        while len(ids) < tokens:
            if start >= len(texts):
                raise ValueError(
                    f"{len(texts)} texts give fewer than {batch} prompts of {tokens} tokens: give more verses"
                )
            ids += tokenizer((" " if ids else "") + texts[start], add_special_tokens=False)["input_ids"]
            start += 1
        rows.append(ids[:tokens])
    return torch.tensor(rows)


# ---- memory and speed ----------------------------------------------------------------------------
def memory_and_speed(
    variants: Mapping[tuple[str, float], nn.Module],
    prompts: Mapping[int, torch.Tensor],
    *,
    new_tokens: int,
    report_batches: Sequence[dict],
    repeats: int = 3,
    dtypes: Sequence[str] = ("float32",),
    progress: bool = False,
) -> pd.DataFrame:
    """One row per variant, dtype and batch size (``prompts[batch size]``): query and KV heads
    left, parameters, KV bytes per token predicted from the layers and measured from the cache
    greedy generation left (``new_tokens`` new tokens), the median seconds of that generation and
    its tokens per second (``repeats`` timed calls after the measured one, which warms up) with the
    device they ran on, and the perplexity on ``report_batches`` (float32) and how many verses they hold."""
    from tqdm.auto import tqdm

    from ...sweeps.throughput import cast_copy, device_name

    rows, verses = [], sum(len(b["input_ids"]) for b in report_batches)
    for (unit, share), model in tqdm(variants.items(), desc="pruned variants", disable=not progress):
        sites = attention_sites(model)
        perplexity = float(np.exp(-PerplexityScorer(report_batches, 1)(model)))
        for dtype in dtypes:
            timed = model if dtype == "float32" else cast_copy(model, dtype)
            for size, ids in prompts.items():
                _, cache = generate_cached(timed, ids, new_tokens)  # also the warm-up
                positions = ids.shape[1] + new_tokens - 1
                seconds = statistics.median(
                    generation_seconds(timed, ids, new_tokens=new_tokens, repeats=repeats, warmup=0)
                )
                rows.append(
                    {
                        "unit": unit,
                        "share": share,
                        "dtype": dtype,
                        "batch": size,
                        "query heads": sum(len(s.heads) for s in sites),
                        "KV heads": sum(len(s.kv_groups) for s in sites),
                        "parameters": count_parameters(model),
                        "KV bytes per token": kv_bytes_per_token(timed),
                        "KV bytes, predicted": kv_bytes(timed, positions, size),
                        "KV bytes, measured": cache_bytes(cache),
                        "cached positions": positions,
                        "seconds": seconds,
                        "tokens per second": size * new_tokens / seconds,
                        "device": device_name(device_of(timed)),
                        "perplexity": perplexity,
                        "perplexity verses": verses,
                    }
                )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Generation:
    """How chapter 13 generates with the KV cache: greedy ``new_tokens`` after each batch of
    ``prompts`` (``{batch size: [batch, tokens] ids}``), timed ``repeats`` times, with
    ``tokenizer``. The chapter's measurements of what pruning buys are its methods."""

    tokenizer: object
    prompts: Mapping[int, torch.Tensor]
    new_tokens: int
    repeats: int

    @classmethod
    def from_verses(
        cls,
        tokenizer,
        texts: Sequence[str],
        *,
        prompt_tokens: int,
        batch_sizes: Sequence[int],
        new_tokens: int,
        repeats: int,
    ) -> Generation:
        """Prompts of ``prompt_tokens`` tokens cut from ``texts`` (``prompt_ids``), one batch per
        batch size."""
        prompts = {size: prompt_ids(tokenizer, texts, prompt_tokens, size) for size in batch_sizes}
        return cls(tokenizer, prompts, new_tokens, repeats)

    def memory_and_speed(
        self, variants: Mapping[tuple[str, float], nn.Module], report_batches: Sequence[dict], dtypes: Sequence[str]
    ) -> pd.DataFrame:
        """``memory_and_speed`` of every variant with these prompts."""
        return memory_and_speed(
            variants,
            self.prompts,
            new_tokens=self.new_tokens,
            report_batches=report_batches,
            repeats=self.repeats,
            dtypes=dtypes,
        )

    def keep_and_reload(self, model: nn.Module, prompt: str) -> pd.DataFrame:
        """``keep_and_reload``: ``model`` saved, rebuilt in a fresh process, continuing ``prompt``."""
        return keep_and_reload(model, self.tokenizer, prompt, self.new_tokens)

    def served_by_llama_cpp(
        self, variants: Mapping[tuple[str, float], nn.Module], language_model: str, texts: Sequence[str], profile: str
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``served_by_llama_cpp`` of every variant with these prompts, its log-probabilities
        checked on ``texts``."""
        return served_by_llama_cpp(
            variants,
            self.tokenizer,
            model_name=language_model,
            texts=texts,
            prompts=self.prompts,
            new_tokens=self.new_tokens,
            repeats=self.repeats,
            profile=profile,
        )


# ---- induction heads and copying -----------------------------------------------------------------
def _ranks(scores: torch.Tensor) -> np.ndarray:
    """1 for the largest value of ``scores`` ``[layers, heads]``, flattened row-major."""
    flat = scores.flatten().double().numpy()
    return pd.Series(-flat).rank(method="min").to_numpy().astype(int)


def induction_ranks(
    model: nn.Module,
    probe: Sequence[dict],
    importance: Mapping[str, Mapping[str, torch.Tensor]],
    grid: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per query head: its induction score on ``probe`` (mean over batches), its rank by
    that score, and its rank (1 = most important) under each of ``importance`` (``{label: I_h}``)
    and, given chapter 11's one-head ``grid``, by the perplexity its masking costs on verses."""
    score = torch.stack([induction_scores(model, b) for b in probe]).mean(0)
    layers, heads = score.shape
    table = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(layers), heads),
            "head": np.tile(np.arange(heads), layers),
            "induction score": score.flatten().numpy(),
            "induction rank": _ranks(score),
        }
    )
    for label, scores in importance.items():
        table[f"rank by {label}"] = _ranks(scores["self"])
    if grid is not None:
        effect = grid.set_index(["layer", "head"])["change_pct"]
        table["rank by one-head effect on verses"] = (
            effect.reindex(list(zip(table["layer"], table["head"])))
            .rank(ascending=False, method="min")
            .astype(int)
            .to_numpy()
        )
    return table


def copying_probes(tokenizer, length: int, *, sequences: int, batch: int, seed: int) -> tuple[list[dict], list[dict]]:
    """``(scored, held out)``: two copying probes of ``sequences`` sequences each (batches of
    ``batch``; ``repeated_tokens`` with different seeds), so that an importance estimated on the
    held-out one is scored on tokens it has not seen. Probe tokens skip the special ids and the
    first 100 others. The copying verdict draws a probe of its own (``verdict_probe``)."""
    low = len(tokenizer.all_special_ids) + 100
    batches = max(1, sequences // batch)
    probe = [
        repeated_tokens(len(tokenizer), length, batch=batch, seed=seed + i, low=low, bos=tokenizer.bos_token_id)
        for i in range(2 * batches)
    ]
    return probe[:batches], probe[batches:]


def copying_curves(
    model: nn.Module,
    orders: Mapping[str, Sequence],
    *,
    verse_batches: Sequence[dict],
    probe: Sequence[dict],
    step: float,
    configs_per_pass: int = 1,
) -> pd.DataFrame:
    """Each order (``{label: [head, ...]}``) pruned step by step, every step scored on the verses
    (perplexity) and on the copying probe (perplexity of the second copy, and the share of its
    tokens predicted right)."""
    steps = [(label, len(order), c) for label, order in orders.items() for c in counts(len(order), step)]
    return _copying_points(
        model, orders, steps=steps, verse_batches=verse_batches, probe=probe, configs_per_pass=configs_per_pass
    )


def _copying_points(
    model: nn.Module,
    orders: Mapping[str, Sequence],
    *,
    steps: Sequence[tuple[str, int, int]],
    verse_batches: Sequence[dict],
    probe: Sequence[dict],
    configs_per_pass: int = 1,
) -> pd.DataFrame:
    """``copying_curves``' rows at the given ``steps`` (``(label, heads in the pool, heads pruned)``):
    the first heads of ``orders[label]`` pruned, scored on the verses and on the copying probe."""
    verses = PerplexityScorer(verse_batches, configs_per_pass)
    steps = [(label, n, c, spec_of(orders[label][:c])) for label, n, c in steps]
    specs = [spec for *_, spec in steps]
    scored = {"verses": score_specs(model, specs, evaluate=verses, progress=False)}
    # the copying probe's perplexity and accuracy from the same passes: one per distinct step
    distinct = list({heads_in(spec): spec for spec in specs}.values())
    probe_rows = dict(
        zip(
            [heads_in(s) for s in distinct],
            PerplexityScorer(probe, configs_per_pass, stats=copying_stats).many_rows(model, distinct),
        )
    )
    sizes = [len(b["input_ids"]) for b in probe]
    rows = [probe_rows[heads_in(spec)] for spec in specs]
    return pd.DataFrame(
        [
            {
                "order": label,
                "pruned": c,
                "share": c / n,
                "verse perplexity": float(np.exp(-scored["verses"][i])),
                "copying perplexity": float(np.exp(-log_likelihood(rows[i][:, :2].contiguous().sum(0).numpy()))),
                "copying accuracy": float(
                    np.mean(
                        [
                            float(b[:, 2].sum() / b[:, 1].sum())  # per batch, as
                            for b in rows[i].split(sizes)
                        ]
                    )
                ),  # copying_accuracy
                "copying sequences": sum(sizes),
            }
            for i, (label, n, c, _) in enumerate(steps)
        ]
    )


def importances(
    model: nn.Module, verse_batches: Sequence[dict], copying_probe: Sequence[dict]
) -> dict[str, Mapping[str, torch.Tensor]]:
    """``{"I_h on verses": ..., "I_h on copying": ...}``: I_h on the verses' LM loss, and on the
    loss of the second copy on ``copying_probe`` (a probe the curves do not score)."""
    from ...heads.importance import head_importance
    from ...probes.induction import copying_nll
    from ...zoo.causal_lm import lm_loss

    return {
        "I_h on verses": head_importance(model, verse_batches, loss_fn=lm_loss, progress=False),
        "I_h on copying": head_importance(
            model, copying_probe, loss_fn=lambda m, b: copying_nll(m, b)[:, 0], progress=False
        ),
    }


def copying_study(
    model: nn.Module,
    importance: Mapping[str, Mapping[str, torch.Tensor]],
    *,
    verses: Sequence[dict],
    probe: Sequence[dict],
    step: float,
    random_orders: int,
    band_orders: int,
    seed: int,
    configs_per_pass: int = 1,
    verdict_probe: Sequence[dict] | None = None,
    n_resamples: int = 1000,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(curves, band, summary)``: each importance's curve and ``random_orders`` random curves
    (``copying_curves``), ``band_orders`` further random orders at the shares the verdict reads
    (``_random_band``), and the summary of every order with the band beside it (``_band_at``) and,
    given a ``verdict_probe``, the copying kept at those shares with its interval over that
    probe's sequences (``_kept_at``)."""
    orders = orders_for(model, importance, random_orders, seed)
    curves = copying_curves(
        model, orders, verse_batches=verses, probe=probe, step=step, configs_per_pass=configs_per_pass
    )
    band = _random_band(
        model,
        copying_summary(curves, orders),
        orders=band_orders,
        seed=seed,
        verse_batches=verses,
        probe=probe,
        configs_per_pass=configs_per_pass,
    )
    summary = _band_at(copying_summary(curves, orders), band)
    if verdict_probe is not None:
        summary = _kept_at(
            model,
            summary,
            order=orders[BAND_ORDER],
            probe=verdict_probe,
            n_resamples=n_resamples,
            seed=seed,
            configs_per_pass=configs_per_pass,
        )
    return curves, band, summary


KEPT_LEVEL = 0.99  # the copying verdict's interval over sequences


def verdict_probe(tokenizer, length: int, *, sequences: int, batch: int, seed: int) -> list[dict]:
    """A copying probe of its own for the verdict's interval: ``sequences`` sequences (at least
    ``MIN_UNITS``, the units of its bootstrap) in batches of ``batch``, drawn with seeds from
    ``seed + 1000`` on, apart from ``copying_probes``' own."""
    if sequences < MIN_UNITS:
        raise ValueError(
            f"the copying verdict's interval is a bootstrap over sequences: give at least {MIN_UNITS} "
            f"(verdict_sequences), not {sequences}"
        )
    low = len(tokenizer.all_special_ids) + 100
    return [
        repeated_tokens(
            len(tokenizer),
            length,
            batch=min(batch, sequences - start),
            seed=seed + 1000 + i,
            low=low,
            bos=tokenizer.bos_token_id,
        )
        for i, start in enumerate(range(0, sequences, batch))
    ]


def copying_kept(
    model: nn.Module,
    order: Sequence,
    *,
    pruned: int,
    probe: Sequence[dict],
    n_resamples: int = 1000,
    seed: int = 0,
    configs_per_pass: int = 1,
) -> tuple[float, float, float, int, float]:
    """``(kept, low, high, sequences, level)``: the copying accuracy of ``model`` with the first
    ``pruned`` heads of ``order`` pruned, over the unpruned model's, on ``probe``, and its interval
    from a paired bootstrap over the probe's sequences (each resample draws the same sequences for
    both models), calibrated to cover ``KEPT_LEVEL`` (``calibrated_interval``; ``level``: the
    percentile level that does)."""
    specs = [spec_of(order[:0]), spec_of(order[:pruned])]
    base, cut = (
        rows[:, [2, 1]].double().numpy()
        for rows in PerplexityScorer(  # per sequence: tokens right, tokens
            probe, configs_per_pass, stats=copying_stats
        ).many_rows(model, specs)
    )
    kept = _kept_ratio(base.sum(0), cut.sum(0))
    low, high, level = calibrated_interval(base, cut, coverage=KEPT_LEVEL, n_resamples=n_resamples, seed=seed)
    return float(kept), float(low), float(high), len(base), float(level)


CALIBRATION_LEVELS = (0.99, 0.995, 0.998, 0.999, 1.0)  # the percentile levels calibration may widen to
_CALIBRATION_DRAWS = 200  # samples drawn to measure each level's coverage


def _kept_ratio(base: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """Copying accuracy kept: (right / tokens) pruned over unpruned, from summed [..., 2] stats
    (NaN where the unpruned model copies nothing in a resample)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (cut[..., 0] / cut[..., 1]) / (base[..., 0] / base[..., 1])


def calibrated_interval(
    base: np.ndarray,
    cut: np.ndarray,
    *,
    coverage: float,
    n_resamples: int = 1000,
    seed: int = 0,
    draws: int = _CALIBRATION_DRAWS,
) -> tuple[float, float, float]:
    """``(low, high, level)``: a percentile interval of the kept ratio from a paired bootstrap over
    sequences (``base``, ``cut``: [sequences, 2] right and tokens), at the smallest of
    ``CALIBRATION_LEVELS`` that covers the ratio ``coverage`` of the time on samples drawn from
    these sequences (a double bootstrap: over 32 sequences of unequal weight the plain percentile
    interval covers less than its level, as chapter 11's grid found for its p-values). Where no
    level reaches it, the widest (the resamples' whole range)."""
    rng = np.random.default_rng(seed + 1)
    n = len(base)
    truth = _kept_ratio(base.sum(0), cut.sum(0))
    covered = {level: 0 for level in CALIBRATION_LEVELS}
    for _ in range(draws):
        pick = rng.integers(0, n, n)
        inner = rng.integers(0, n, size=(n_resamples, n))
        ratios = _kept_ratio(resampled_sums(base[pick], inner), resampled_sums(cut[pick], inner))
        for level in CALIBRATION_LEVELS:
            low, high = np.nanquantile(ratios, [(1 - level) / 2, (1 + level) / 2])
            covered[level] += low <= truth <= high
    level = next((lv for lv in CALIBRATION_LEVELS if covered[lv] >= coverage * draws), CALIBRATION_LEVELS[-1])
    indices = resample_indices(n, n_resamples, seed)
    ratios = _kept_ratio(resampled_sums(base, indices), resampled_sums(cut, indices))
    low, high = np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high), float(level)


def _kept_at(
    model: nn.Module,
    summary: pd.DataFrame,
    *,
    order: Sequence,
    probe: Sequence[dict],
    n_resamples: int,
    seed: int,
    configs_per_pass: int = 1,
) -> pd.DataFrame:
    """``summary`` with, on ``BAND_ORDER``'s row, per tolerance, ``copying_kept`` at the share that
    order prunes within it (``COPYING_KEPT``, ``copying_kept_interval``) and the sequences."""
    out = summary.copy()
    row = out["order"] == BAND_ORDER
    for t in _TOLERANCES:
        pruned = round(float(out.loc[row, prunable_within(t)].iloc[0]) * len(order))
        kept, low, high, sequences, level = copying_kept(
            model,
            order,
            pruned=pruned,
            probe=probe,
            n_resamples=n_resamples,
            seed=seed,
            configs_per_pass=configs_per_pass,
        )
        out.loc[row, COPYING_KEPT.format(t)] = kept
        out.loc[row, copying_kept_interval(t, "low")] = low
        out.loc[row, copying_kept_interval(t, "high")] = high
        out.loc[row, copying_kept_interval(t, "level")] = level
        out.loc[row, VERDICT_SEQUENCES] = sequences
    return out


def orders_for(
    model: nn.Module, importance: Mapping[str, Mapping[str, torch.Tensor]], random_orders: int, seed: int
) -> dict[str, list]:
    """``{label: order}``: the query heads by each importance (least important first) and
    ``random_orders`` random orders."""
    pool = heads_of(model)
    orders = {label: order_by_importance(scores, pool) for label, scores in importance.items()}
    orders.update({f"random {r}": random_order(pool, seed + r) for r in range(random_orders)})
    return orders


_TOLERANCES = COPYING_TOLERANCES
COPYING_FLOOR = 0.5  # copying "breaks" below half of the unpruned model's accuracy
BAND_ORDER = "I_h on verses"  # the order whose decisions the random band is drawn at


def _random_band(
    model: nn.Module,
    summary: pd.DataFrame,
    *,
    orders: int,
    seed: int,
    verse_batches: Sequence[dict],
    probe: Sequence[dict],
    configs_per_pass: int = 1,
) -> pd.DataFrame:
    """``orders`` random orders (seeds ``seed + 1000``, ...; apart from the curves' own), each
    pruned to the shares where ``BAND_ORDER`` stops within each tolerance (``copying_summary``;
    shares of 0 skipped), scored as ``_copying_points``: rows ``copying_curves``' columns, one
    per order and share. Pruning curves of SmolLM2 cost too much for 20 whole random curves
    on a CPU; the band is drawn where the verdict is read."""
    pool = heads_of(model)
    row = summary.set_index("order").loc[BAND_ORDER]
    shares = sorted({float(row[prunable_within(t)]) for t in _TOLERANCES} - {0.0})
    drawn = {f"random {seed + 1000 + r}": random_order(pool, seed + 1000 + r) for r in range(orders)}
    steps = [(label, len(pool), round(share * len(pool))) for share in shares for label in drawn]
    if not steps:
        return pd.DataFrame(
            columns=["order", "pruned", "share", "verse perplexity", "copying perplexity", "copying accuracy"]
        )
    return _copying_points(
        model, drawn, steps=steps, verse_batches=verse_batches, probe=probe, configs_per_pass=configs_per_pass
    )


def _band_at(summary: pd.DataFrame, band: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with, per tolerance, the random band's 5th and 95th percentile of copying
    accuracy at ``BAND_ORDER``'s share (on that order's row; NaN where no band was drawn) and
    how many random orders it holds."""
    out = summary.copy()
    for t in _TOLERANCES:
        share = out.loc[out["order"] == BAND_ORDER, prunable_within(t)]
        at = band[np.isclose(band["share"], share.iloc[0])] if len(band) and len(share) else band
        for q, name in zip(BAND, ("5%", "95%")):
            out.loc[out["order"] == BAND_ORDER, random_copying_at(t, name)] = (
                float(at["copying accuracy"].quantile(q)) if len(at) else np.nan
            )
        out.loc[out["order"] == BAND_ORDER, random_orders_at(t)] = len(at)
    return out


def broken_at(
    curves: pd.DataFrame, order: str, tolerances: Sequence[float] = _TOLERANCES, floor: float = COPYING_FLOOR
) -> dict:
    """For one order: per tolerance, the share prunable before the verse perplexity first rises
    more than it above the unpruned one (as chapter 11 reads its curves) and the copying accuracy
    at that share; and the first share at which copying accuracy falls below ``floor`` times its
    unpruned value (None if it never does)."""
    part = curves[curves["order"] == order].sort_values("share")
    base = part.iloc[0]
    row = {"order": order, UNPRUNED_COPYING: float(base["copying accuracy"])}
    for tolerance in tolerances:
        within = 0.0
        for _, step in part.iterrows():
            if step["verse perplexity"] > base["verse perplexity"] * (1 + tolerance):
                break
            within = float(step["share"])
        row[prunable_within(tolerance)] = within
        row[copying_at(tolerance)] = float(part.loc[part["share"] == within, "copying accuracy"].iloc[0])
    fallen = part[part["copying accuracy"] < floor * base["copying accuracy"]]
    row[copying_below(floor)] = float(fallen["share"].min()) if len(fallen) else None
    return row


def copying_summary(curves: pd.DataFrame, orders: Sequence[str]) -> pd.DataFrame:
    """``broken_at`` for every order, one row each."""
    return pd.DataFrame([broken_at(curves, order) for order in orders])


def parse_levels(levels: Sequence[str | float]) -> list[float]:
    """Shares given as numbers or fractions (``"1/3"``) -> floats in [0, 1)."""
    from fractions import Fraction

    out = [float(Fraction(str(x))) for x in levels]
    if any(not 0 <= x < 1 for x in out):
        raise ValueError(f"pruning levels are shares in [0, 1), e.g. [0, '1/3', '2/3']; got {levels}")
    return out


def induction_summary(ranks: pd.DataFrame, top: int = INDUCTION_TOP) -> pd.DataFrame:
    """The ``top`` heads by induction score, with their ranks by every other column of ``ranks``."""
    return ranks.nsmallest(top, "induction rank").reset_index(drop=True)


def memory_figure(table: pd.DataFrame, batch: int):
    """KV bytes per token and verse perplexity against the share removed, one line per unit
    (float32 rows at ``batch``)."""
    import matplotlib.pyplot as plt

    part = table[(table["dtype"] == "float32") & (table["batch"] == batch)]
    base = part[part["unit"] == "unpruned"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for unit, color in (("KV groups", "tab:red"), ("query heads", "tab:blue")):
        line = pd.concat([base, part[part["unit"] == unit]]).sort_values("share")
        for ax, column in zip(axes, ("KV bytes per token", "tokens per second", "perplexity")):
            ax.plot(line["share"] * 100, line[column], marker="o", color=color, label=unit)
            ax.set(xlabel="removed (%)", title=column)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"what removing heads buys: batch {batch}, float32")
    fig.tight_layout()
    return fig


def copying_figure(curves: pd.DataFrame, band: pd.DataFrame | None = None):
    """Verse perplexity and copying accuracy against the share of query heads pruned, per order:
    the curves' random orders as a band (their range), and ``_random_band``'s 5-95% interval as a
    bar at each share it was drawn at."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    rand = curves[curves["order"].str.startswith("random")]
    for ax, column in zip(axes, ("verse perplexity", "copying accuracy")):
        if len(rand):
            spread = rand.groupby("share")[column].agg(["min", "max"]).reset_index()
            ax.fill_between(
                spread["share"] * 100,
                spread["min"],
                spread["max"],
                color="grey",
                alpha=0.3,
                label=f"random curve{'s (range)' if rand['order'].nunique() > 1 else ''}",
            )
        if band is not None and len(band):
            bars = band.groupby("share")[column].quantile(list(BAND)).unstack()
            ax.vlines(
                bars.index * 100,
                bars[BAND[0]],
                bars[BAND[1]],
                color="black",
                linewidth=3,
                label=f"random, {BAND[0]:.0%}-{BAND[1]:.0%} ({band['order'].nunique()} orders)",
            )
        for order, part in curves[~curves["order"].str.startswith("random")].groupby("order", sort=False):
            ax.plot(part["share"] * 100, part[column], marker="o", markersize=3, label=order)
        ax.set(xlabel="query heads pruned (%)", title=column, xlim=(0, 100))
        ax.legend(fontsize=8)
    axes[0].set_yscale("log")
    fig.tight_layout()
    return fig


# ---- published configurations (copied by hand from each model's config.json on the Hugging Face
# hub and its model card; the build has no network to fetch them) -----------------------------------
PUBLISHED = (
    PublishedModel("Llama-3-8B", layers=32, kv_heads=8, head_dim=128, parameters=8.03),
    PublishedModel("Qwen3-8B", layers=36, kv_heads=8, head_dim=128, parameters=8.19),
    # 5 of every 6 layers attend to the last 1,024 positions only
    PublishedModel("Gemma-3-4B (text)", layers=34, kv_heads=4, head_dim=256, parameters=3.88, sliding=29, window=1024),
    PublishedModel("SmolLM2-135M", layers=30, kv_heads=3, head_dim=64, parameters=0.135),
)


def published() -> pd.DataFrame:
    """The KV cache of each ``PUBLISHED`` configuration (``kv.cache.published_kv_table``)."""
    return published_kv_table(PUBLISHED)


# ---- a pruned model to keep ------------------------------------------------------------------------
_RELOAD_AND_GENERATE = """
import sys, torch
from helpers.heads.pruning import load_pruned
model = load_pruned(sys.argv[1]).to(sys.argv[5])
ids = torch.load(sys.argv[2]).to(sys.argv[5])
with torch.no_grad():
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, use_cache=True,
                         max_new_tokens=int(sys.argv[4]), min_new_tokens=int(sys.argv[4]), output_logits=True,
                         return_dict_in_generate=True, pad_token_id=0)
torch.save({"sequences": out.sequences.cpu(), "logits": torch.stack(out.logits).cpu()}, sys.argv[3])
"""


def keep_and_reload(model: nn.Module, tokenizer, prompt: str, new_tokens: int) -> dict:
    """Save the pruned ``model`` (``save_pruned``), rebuild it in a fresh Python process from the
    saved files alone, and generate greedily there and here. One row: the saved per-layer layout
    (query heads and KV groups per layer, as text), the folder's size, whether the tokens agree,
    the largest logit gap, and the text generated."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from ...heads.pruning import LAYOUT_KEY, save_pruned

    ids = to_device(tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"], model)
    with torch.no_grad():
        here = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            use_cache=True,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    with tempfile.TemporaryDirectory() as tmp:
        folder = save_pruned(model, Path(tmp) / "pruned")
        torch.save(ids.cpu(), Path(tmp) / "ids.pt")
        root = Path(__file__).resolve().parents[3]  # the repository, where ``helpers`` imports from
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _RELOAD_AND_GENERATE,
                str(folder),
                str(Path(tmp) / "ids.pt"),
                str(Path(tmp) / "out.pt"),
                str(new_tokens),
                str(device_of(model)),  # rebuilt on the same device, so its arithmetic is the same
            ],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise RuntimeError(f"reloading the pruned model in a fresh process failed:\n{done.stderr[-3000:]}")
        there = torch.load(Path(tmp) / "out.pt")
        layout = json.loads((folder / "config.json").read_text())[LAYOUT_KEY]
        size = sum(f.stat().st_size for f in folder.iterdir())
    return pd.DataFrame(
        [
            {
                "query heads per layer": str(layout["self"]["num_attention_heads"]),
                "KV groups per layer": str(layout["self"]["num_key_value_heads"]),
                "megabytes saved": size / 2**20,
                "same tokens": bool(torch.equal(here.sequences.cpu(), there["sequences"])),
                "largest logit gap": float((torch.stack(here.logits).cpu() - there["logits"]).abs().max()),
                "generated": tokenizer.decode(there["sequences"][0, ids.shape[1] :]),
            }
        ]
    )
