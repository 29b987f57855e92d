"""Chapter 14, memory budget: its experiment, the rules that judge its claims and its findings in words.

What a byte of KV cache is worth (chapter 14, SmolLM2): removing KV groups against keeping
full context in some heads only, quantizing the cache and evicting tokens, at equal bytes.

Every configuration reads the same whole-chapter sequences (long_texts): a prompt read in full,
then the rest through the configuration's cache. Its bytes per token are the most its cache
holds while reading a sequence, over the sequence's length, against the plain 16-bit cache of
the unpruned model (100%). Scores per sequence: the negative log-likelihood of the chapter's
later half (perplexity) and the copying of a passage repeated after hundreds of tokens.

    configs = plan(model, importance, window_scores=windows, layout=layout, p=Plan(...))  # every configuration
    rows = score_all(model, configs, ids=ids, layout=layout)                             # per config and sequence
    points = point_table(model, configs, rows=rows, layout=layout, **bootstrap)          # per config, intervals
    pairs = pair_table(points, rows, budgets=(0.5, 0.25), **bootstrap)                   # per budget, method pairs

Chapter 14's claims, from work after the paper: at equal KV-cache bytes, quantizing the cache
costs less perplexity than evicting tokens ("More Tokens, Lower Precision", Zhang et al. 2024,
the comparison that paper makes) and than removing KV groups (ours); keeping full context in the groups that need it
beats removing groups (DuoAttention's premise); groups removed by importance beat groups removed
at random. The rules read ``14_points`` and ``14_pairs``.

``findings``: chapter 14's "What this run shows" paragraph.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn

from ...base.devices import to_device
from ...heads.grouped_query import kv_group_heads, kv_group_order
from ...heads.sites import attention_sites
from ...kv.budget import (
    SCORE_BYTES,
    CacheSpec,
    bytes_after,
    entries_after,
    fast_run,
    head_dim_of,
    predicted_peak_bytes,
    prompt_pass,
    pruned_copy,
    real_run,
)
from ...zoo.long_texts import Layout
from ..store.columns import MIN_BAND_ORDERS, shown
from ..store.results import ChapterTables
from ..verdicts.engine import CANNOT_TELL, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, Results, present
from ..verdicts.text import percent, words

UNPRUNED = "unpruned"
REMOVED = "KV groups removed"
RANDOM = "KV groups removed at random"
WINDOWED = "windowed heads"
QUANTIZED = "quantized"
EVICTED = "evicted (heavy hitters)"
COMBINED = "KV groups removed + 4-bit"
METHODS = (REMOVED, WINDOWED, QUANTIZED, EVICTED, COMBINED)  # compared at each budget (the band is not a method)
QUANTIZING = (QUANTIZED, COMBINED)  # the methods whose cache holds codes, not 16-bit values
FIT = 0.001  # a configuration fits a budget when its share of the bytes exceeds it by at most 0.1 point
_STATS = ["nll", "tokens", "copied", "copy tokens", "copy nll"]


@dataclass(frozen=True)
class Config:
    method: str
    setting: str
    target: float | None  # the budget it was sized for (None: fixed by its bits)
    removed: tuple = ()  # query heads physically removed, (kind, layer, head)
    spec: CacheSpec = field(default_factory=CacheSpec)

    @property
    def name(self) -> str:
        return f"{self.method}: {self.setting}"


@dataclass(frozen=True)
class Plan:
    """Which configurations ``plan`` builds (chapter 14's parameters of the same names): KV groups
    removed and heads windowed to each of ``budgets`` (shares of the 16-bit cache's bytes), heavy
    hitters at ``evict_budgets``, KV groups removed to ``combo_budgets`` and then quantized to 4
    bits; the quantized caches of ``bits`` (8: fp8; 4, 2: quanto, with ``residual_length`` recent
    positions in 16 bits); windowed heads keep ``sinks`` first and ``window`` recent positions;
    ``band_orders`` random orders of KV groups removed at ``band_budget``, drawn with ``seed``."""

    budgets: Sequence[float] = (0.9, 0.75, 0.5, 0.25, 0.1)
    evict_budgets: Sequence[float] = (0.75, 0.5, 0.25, 0.1)
    combo_budgets: Sequence[float] = (0.75, 0.5)
    bits: Sequence[int] = (8, 4, 2)
    residual_length: int = 32
    sinks: int = 4
    window: int = 28
    band_orders: int = 20
    band_budget: float = 0.5
    seed: int = 0


# ---- which configurations ------------------------------------------------------------------------
def heads_of_groups(model: nn.Module, groups: Sequence[tuple[int, int]]) -> tuple:
    sites = attention_sites(model)
    return tuple(("self", layer, h) for layer, g in groups for h in kv_group_heads(sites[layer], g))


def _groups(model: nn.Module) -> list[tuple[int, int]]:
    return [(s.layer, g) for s in attention_sites(model) for g in s.kv_groups]


def _kept_within(model: nn.Module, order: Sequence[tuple[int, int]], budget: float, layout: Layout) -> int:
    """The most KV groups (the last of ``order``) whose cache fits ``budget`` (+``FIT``): a layer
    left with no group still caches a phantom entry (``sites.PHANTOM_WIDTH``)."""
    n = len(order)
    for kept in range(math.floor(budget * n + 1e-9), -1, -1):
        c = Config(REMOVED, "", budget, heads_of_groups(model, order[: n - kept]))
        if bytes_share(model, c, layout)[1] <= budget + FIT:
            return kept
    return 0


def plan(
    model: nn.Module, importance: Mapping[str, torch.Tensor], *, window_scores: pd.DataFrame, layout: Layout, p: Plan
) -> list[Config]:
    """Every configuration the chapter scores: the unpruned model; KV groups removed by importance
    to each budget and at random (``band_orders`` orders at ``band_budget``); windowed heads at each
    budget it reaches (full context kept in the groups ``window_scores`` ranks first); the cache
    quantized to each of ``bits``; heavy hitters at each of ``evict_budgets``; groups removed to each
    of ``combo_budgets`` and then quantized to 4 bits."""
    order, n = kv_group_order(model, importance), len(_groups(model))
    configs = [Config(UNPRUNED, "16-bit cache", 1.0)]
    for b in p.budgets:
        kept = _kept_within(model, order, b, layout)
        configs.append(Config(REMOVED, f"{kept} of {n} groups kept", b, heads_of_groups(model, order[: n - kept])))
    rng = np.random.default_rng(p.seed + 1000)
    kept = math.floor(p.band_budget * n + 1e-9)
    pool = _groups(model)
    for r in range(p.band_orders):
        drawn = [pool[i] for i in rng.permutation(n)[: n - kept]]
        configs.append(
            Config(RANDOM, f"order {r}: {kept} of {n} groups kept", p.band_budget, heads_of_groups(model, drawn))
        )
    share = (p.sinks + p.window) / layout.total
    ranked = window_scores.sort_values(["beyond window", "layer", "group"], ascending=[False, True, True])
    layers = int(window_scores["layer"].max()) + 1
    per_layer = int(window_scores["group"].max()) + 1
    for b in p.budgets:
        if b < share:
            continue
        f = math.floor(n * (b - share) / (1 - share) + 1e-9)
        chosen = {(int(r.layer), int(r.group)) for r in ranked.head(f).itertuples()}
        full = tuple(tuple((layer, g) in chosen for g in range(per_layer)) for layer in range(layers))
        configs.append(
            Config(
                WINDOWED,
                f"{f} of {n} groups full, the rest {p.sinks} sinks + {p.window}",
                b,
                spec=CacheSpec("window", sinks=p.sinks, window=p.window, full=full),
            )
        )
    for bits in p.bits:
        spec = CacheSpec("fp8") if bits == 8 else CacheSpec("quanto", bits=bits, residual=p.residual_length)
        setting = (
            "fp8 (e4m3), one scale per layer"
            if bits == 8
            else f"{bits}-bit (quanto), {p.residual_length} recent positions in 16 bits"
        )
        configs.append(Config(QUANTIZED, setting, None, spec=spec))
    per_position = 2 * head_dim_of(model) * 2  # keys and values of one KV head, 16 bits
    for b in p.evict_budgets:
        budget = math.floor(b * layout.total * per_position / (per_position + SCORE_BYTES))
        configs.append(
            Config(
                EVICTED,
                f"{budget} positions per KV head, {budget // 2} of them recent",
                b,
                spec=CacheSpec("evict", budget=budget, recent=budget // 2),
            )
        )
    for b in p.combo_budgets:
        kept = math.floor(b * n + 1e-9)
        configs.append(
            Config(
                COMBINED,
                f"{kept} of {n} groups kept, 4-bit",
                None,
                heads_of_groups(model, order[: n - kept]),
                CacheSpec("quanto", bits=4, residual=p.residual_length),
            )
        )
    # two budgets that give a small model the same configuration: score it once (rows pair by name)
    unique: dict[str, Config] = {}
    for c in configs:
        unique.setdefault(c.name, c)
    return list(unique.values())


# ---- where windowed heads keep full context ----------------------------------------------------------
@torch.no_grad()
def window_scores(model: nn.Module, ids: torch.Tensor, *, layout: Layout, sinks: int, window: int) -> pd.DataFrame:
    """One row per (layer, KV group): the attention its query heads put, from the positions read
    after the prompt, on positions a window of ``sinks`` + ``window`` would have dropped (mean over
    those positions, the group's query heads and the sequences ``ids``): how much that group reads
    beyond the window."""
    from ...probes.induction import eager_attention

    ids = to_device(ids, model)
    with eager_attention(model):
        attentions = model(input_ids=ids, output_attentions=True).attentions  # per layer [B, heads, T, T]
    t = torch.arange(layout.prompt, ids.shape[1], device=ids.device).unsqueeze(1)
    j = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
    beyond = (j <= t) & (j >= sinks) & (t - j > window)  # [queries, keys]
    group = model.config.num_attention_heads // model.config.num_key_value_heads
    rows = []
    for layer, probs in enumerate(attentions):
        mass = (probs[:, :, layout.prompt :].float() * beyond).sum(-1).mean((0, 2))  # [heads]
        for g, value in enumerate(mass.view(-1, group).mean(1).tolist()):
            rows.append({"layer": layer, "group": g, "beyond window": value})
    table = pd.DataFrame(rows)
    table["rank"] = table["beyond window"].rank(ascending=False, method="first").astype(int)
    return table


# ---- scoring -------------------------------------------------------------------------------------------
@torch.no_grad()
def sequence_stats(model: nn.Module, hidden: torch.Tensor, ids: torch.Tensor, layout: Layout) -> np.ndarray:
    """``[B, 5]`` from the hidden states of the positions after the prompt: summed NLL (nats) of the
    chapter's later half and its token count, then the repeat's tokens copied right (top prediction),
    their count and their summed NLL (on the CPU; ``ids`` is moved to the hidden states' device)."""
    ids = ids.to(hidden.device)

    def scored(targets: torch.Tensor):
        logits = model.get_output_embeddings()(hidden[:, targets - 1 - layout.prompt]).float()
        logp = logits.log_softmax(-1).gather(-1, ids[:, targets].unsqueeze(-1)).squeeze(-1)
        return logp, logits.argmax(-1) == ids[:, targets]

    ppl, _ = scored(layout.perplexity_targets())
    copy, right = scored(layout.copy_targets())
    n = ids.shape[0]
    return np.stack(
        [
            -ppl.sum(1).double().cpu().numpy(),
            np.full(n, ppl.shape[1], float),
            right.sum(1).double().cpu().numpy(),
            np.full(n, copy.shape[1], float),
            -copy.sum(1).double().cpu().numpy(),
        ],
        1,
    )


def _batches(ids: torch.Tensor, size: int) -> list[torch.Tensor]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


@torch.no_grad()
def score_all(
    model: nn.Module,
    configs: Sequence[Config],
    *,
    ids: torch.Tensor,
    layout: Layout,
    batch_size: int = 16,
    progress: bool = True,
) -> dict[str, np.ndarray]:
    """``{config name: [sequences, 5] sequence_stats}``. Each pruned model is built once and reads
    each batch's prompt once for all the configurations on it; heavy hitters run their real cache."""
    from tqdm.auto import tqdm

    by_model: dict[tuple, list[Config]] = {}
    for c in configs:
        by_model.setdefault(c.removed, []).append(c)
    out: dict[str, list[np.ndarray]] = {c.name: [] for c in configs}
    bar = tqdm(total=len(configs), desc="cache configurations", disable=not progress)
    for removed, group in by_model.items():
        pruned = pruned_copy(model, removed) if removed else model
        for batch in _batches(ids, batch_size):
            prompt = prompt_pass(pruned, batch, layout.prompt)
            for c in group:
                hidden = fast_run(pruned, batch, prompt, c.spec)  # heavy hitters: their real cache
                out[c.name].append(sequence_stats(pruned, hidden, batch, layout))
        bar.update(len(group))
        del pruned
    bar.close()
    return {name: np.concatenate(parts) for name, parts in out.items()}


def first_read_accuracy(model: nn.Module, ids: torch.Tensor, layout: Layout, batch_size: int = 16) -> float:
    """The unpruned model's accuracy on the passage where it is first read: copying's floor."""
    right = total = 0
    targets = layout.first_read_targets()
    with torch.no_grad():
        for batch in _batches(to_device(ids, model), batch_size):
            logits = model(input_ids=batch[:, : int(targets.max())]).logits[:, targets - 1]
            right += int((logits.argmax(-1) == batch[:, targets]).sum())
            total += targets.numel() * len(batch)
    return right / total


def checked(configs: Sequence[Config], budget: float) -> list[Config]:
    """The configurations ``check_table`` reads one position at a time: every one whose fast pass
    stands in for its real cache (each method at each budget, each bit width), and one of heavy
    hitters (the one sized to ``budget``, or the first), whose scores come from the real cache
    itself: only its bytes need checking. The random orders are removals like importance's."""
    out = [c for c in configs if c.method not in (RANDOM, EVICTED)]
    return out + _at_budget_or_first(configs, EVICTED, budget)


def _at_budget_or_first(configs: Sequence[Config], method: str, budget: float) -> list[Config]:
    """``method``'s configuration sized to ``budget``, or its first; none if it has none."""
    mine = [c for c in configs if c.method == method]
    return ([c for c in mine if c.target == budget] or mine)[:1]


def exact_checked(configs: Sequence[Config], budget: float) -> set[str]:
    """The names of the configurations ``check_table`` also reads in float32: one of each way a
    fast pass is computed (the plain cache; KV groups removed, windowed heads and removal with 4
    bits at ``budget``, or their first), and every quantized cache (each bit width is its own
    backend or grouping). Float32 is where a fast pass shows that it computes what its cache
    does; the others of a kind share that code and are read in 16 bits only (a float32 reading
    of each quantized cache one position at a time costs as much as the rest together)."""
    names = {c.name for c in configs if c.method in (UNPRUNED, QUANTIZED)}
    for method in (REMOVED, WINDOWED, COMBINED):
        names |= {c.name for c in _at_budget_or_first(configs, method, budget)}
    return names


def _scored_log_probs(model: nn.Module, hidden: torch.Tensor, ids: torch.Tensor, layout: Layout) -> torch.Tensor:
    """``[sequences, scored tokens]`` log-probabilities (float32) of the scored tokens, from the
    last hidden states of the positions after the prompt."""
    targets = torch.cat([layout.perplexity_targets(), layout.copy_targets()])
    head = model.get_output_embeddings()
    logits = head(hidden[:, targets - 1 - layout.prompt]).float()
    return logits.log_softmax(-1).gather(-1, ids.to(logits.device)[:, targets].unsqueeze(-1)).squeeze(-1)


def _chapter_gap(real: torch.Tensor, fast: torch.Tensor) -> float:
    """The largest gap between two ways' mean log-probability of one sequence's scored tokens
    (nats per token: log-perplexity)."""
    return float((real.mean(1) - fast.mean(1)).abs().max())


@torch.no_grad()
def check_table(
    model: nn.Module, configs: Sequence[Config], *, ids: torch.Tensor, layout: Layout, exact: set[str] | None = None
) -> pd.DataFrame:
    """On ``ids`` (a few sequences), per configuration of ``configs``: the bytes its real cache
    held at most while the sequences were read one position at a time, in the model's dtype
    (measured), and the arithmetic's (predicted); then the fast pass the chapter scores with
    against that real cache, per sequence, as the gap in log-perplexity: in the model's dtype,
    where the two ways round differently (matrix products of other shapes), and in float32, where
    a fast pass computes what its cache does up to float32's rounding, or, for a quantized cache,
    up to a code whose boundary a key's last bit crosses (the configurations named in ``exact``,
    every one when None; the float32 columns are empty for the others). ``fast_pass_tolerance``
    reads the 16-bit caches' 16-bit gaps; ``assert_fast_passes`` holds the float32 gaps to it. Heavy hitters
    are scored with the real cache itself: their gaps are 0 by construction, not measured, and
    their bytes are measured on the first sequence only (the costliest cache to read)."""
    rows = []
    for c in configs:
        pruned = pruned_copy(model, c.removed) if c.removed else model
        mine = ids[:1] if c.spec.kind == "evict" else ids
        real16, measured = real_run(pruned, mine, layout.prompt, c.spec)
        row = {
            "method": c.method,
            "setting": c.setting,
            "sequences": len(mine),
            "positions": layout.total,
            "bytes, measured": measured,
            "bytes, predicted": predicted_peak_bytes(
                pruned, c.spec, prompt=layout.prompt, total=layout.total, batch=len(mine)
            ),
            "fast pass": _fast_kind(c.spec),
        }
        if c.spec.kind != "evict":
            fast16 = fast_run(pruned, ids, prompt_pass(pruned, ids, layout.prompt), c.spec)
            logp16 = [_scored_log_probs(pruned, h, ids, layout) for h in (real16, fast16)]
            row["largest sequence gap, 16-bit"] = _chapter_gap(*logp16)
            if exact is None or c.name in exact:
                row.update(_float32_check(pruned, c, ids, layout))
        rows.append(row)
    return pd.DataFrame(rows)


def _float32_check(pruned: nn.Module, c: Config, ids: torch.Tensor, layout: Layout) -> dict:
    """``c``'s real cache against its fast pass on a float32 copy of ``pruned``: both ways'
    perplexity, their largest gap per sequence (log-perplexity) and on one token (nats)."""
    exact = copy.deepcopy(pruned).float()
    real = real_run(exact, ids, layout.prompt, c.spec)[0]
    fast = fast_run(exact, ids, prompt_pass(exact, ids, layout.prompt), c.spec)
    logp = [_scored_log_probs(exact, h, ids, layout) for h in (real, fast)]
    return {
        "perplexity, real cache": math.exp(-float(logp[0].mean())),
        "perplexity, fast pass": math.exp(-float(logp[1].mean())),
        "largest sequence gap, float32": _chapter_gap(*logp),
        "largest log-prob gap, scored tokens": float((logp[0] - logp[1]).abs().max()),
    }


def fast_pass_tolerance(checks: pd.DataFrame) -> float:
    """What 16-bit rounding alone moves a sequence's log-perplexity by: the largest gap between a
    real cache and its fast pass in the model's dtype (``check_table``) over the caches that hold
    16-bit values (the plain, removed and windowed ones: their float32 gaps show that the two ways
    compute the same thing, so their 16-bit gaps are rounding). Every number of the chapter is
    computed in that dtype, so a fast pass off by less, in float32, changes nothing the chapter
    could resolve; a gap between two methods smaller than this is not called a difference
    (``budget_table``)."""
    rounding = checks[~checks["method"].isin((*QUANTIZING, EVICTED))]
    if not (rounding["method"] == UNPRUNED).any():
        raise ValueError("the checks hold no plain cache (method 'unpruned'): check it to derive the tolerance")
    return float(rounding["largest sequence gap, 16-bit"].max())


def assert_fast_passes(checks: pd.DataFrame) -> float:
    """The tolerance (``fast_pass_tolerance``), after asserting that every real cache held the
    bytes the arithmetic predicts and that every fast pass, in float32, is within the tolerance
    of its real cache on every checked sequence; a ValueError names each that is not."""
    tolerance = fast_pass_tolerance(checks)
    wrong_bytes = checks[checks["bytes, measured"] != checks["bytes, predicted"]]
    off = checks[checks["largest sequence gap, float32"] > tolerance]
    if len(wrong_bytes) or len(off):
        raise ValueError(
            f"fast passes or byte counts disagree with the real caches: bytes {list(wrong_bytes['setting'])}; "
            f"log-perplexity gaps above {tolerance:.2e} nats: "
            + ", ".join(f"{r['setting']} {r['largest sequence gap, float32']:.2e}" for r in off.to_dict("records"))
        )
    return tolerance


def fast_pass_checks(
    model: nn.Module, configs: Sequence[Config], *, ids: torch.Tensor, layout: Layout, p: Plan
) -> tuple[pd.DataFrame, float]:
    """The chapter's check of its fast passes on ``ids`` (a few sequences): ``check_table`` over
    the configurations ``checked`` names at ``p.band_budget``, in float32 as well for those
    ``exact_checked`` names. Returns ``(checks, tolerance)``, after ``assert_fast_passes`` (a
    ValueError when a real cache's bytes or a fast pass's float32 gap disagree)."""
    exact = exact_checked(configs, p.band_budget)
    checks = check_table(model, checked(configs, p.band_budget), ids=ids, layout=layout, exact=exact)
    return checks, assert_fast_passes(checks)


def _fast_kind(spec: CacheSpec) -> str:
    return {
        "plain": "one pass after the prompt",
        "window": "one pass, per-head visibility mask",
        "evict": "the real cache (no shortcut)",
        "quanto": f"the real cache, {spec.residual} positions a pass",
        "fp8": "the real cache, one pass",
    }[spec.kind]


# ---- tables ----------------------------------------------------------------------------------------------
def bytes_share(model: nn.Module, c: Config, layout: Layout) -> tuple[int, float]:
    """(bytes per token at ``layout.total`` positions, share of the unpruned 16-bit cache's)."""
    peak = predicted_peak_bytes(
        model, c.spec, prompt=layout.prompt, total=layout.total, batch=1, entries=entries_after(model, c.removed)
    )
    base = predicted_peak_bytes(model, CacheSpec(), prompt=layout.prompt, total=layout.total, batch=1)
    return peak // layout.total if peak % layout.total == 0 else peak / layout.total, peak / base


def _prompt_share(model: nn.Module, c: Config, layout: Layout) -> float:
    """The bytes every configuration holds while it reads the prompt in one pass (its model's own
    KV heads, every position of the prompt, 16 bits: windows, codes and evictions apply from the
    first position after it), as a share of the unpruned 16-bit cache's most."""
    plain = bytes_after(
        model,
        CacheSpec(),
        positions=layout.prompt,
        prompt=layout.prompt,
        batch=1,
        entries=entries_after(model, c.removed),
    )
    return plain / predicted_peak_bytes(model, CacheSpec(), prompt=layout.prompt, total=layout.total, batch=1)


def _ratio_interval(
    stats: np.ndarray, base: np.ndarray, *, indices: np.ndarray, column: int, count: int
) -> np.ndarray:
    """Resampled ratio of exp(mean NLL) of ``stats`` to ``base`` (paired over sequences)."""
    a = stats[indices][..., column].sum(-1) / stats[indices][..., count].sum(-1)
    b = base[indices][..., column].sum(-1) / base[indices][..., count].sum(-1)
    return np.exp(a - b)


def point_table(
    model: nn.Module,
    configs: Sequence[Config],
    *,
    rows: Mapping[str, np.ndarray],
    layout: Layout,
    n_resamples: int,
    alpha: float,
    seed: int,
) -> pd.DataFrame:
    """One row per configuration: bytes per token and share, perplexity and its ratio to the
    unpruned model's with a paired bootstrap interval over sequences (1 - ``alpha``), copying
    accuracy with its interval, and the sequences."""
    from ...heads.significance import resample_indices

    base = rows[configs[0].name]
    n = len(base)
    indices = resample_indices(n, n_resamples, seed)
    lo, hi = 100 * alpha / 2, 100 * (1 - alpha / 2)
    out = []
    for c in configs:
        s = rows[c.name]
        per_token, share = bytes_share(model, c, layout)
        ratio = _ratio_interval(s, base, indices=indices, column=0, count=1)
        copied = s[indices][..., 2].sum(-1) / s[indices][..., 3].sum(-1)
        out.append(
            {
                "method": c.method,
                "setting": c.setting,
                "budget": c.target,
                "bytes per token": per_token,
                "bytes share": share,
                "prompt bytes share": _prompt_share(model, c, layout),
                "perplexity": math.exp(s[:, 0].sum() / s[:, 1].sum()),
                "perplexity ratio": math.exp(s[:, 0].sum() / s[:, 1].sum() - base[:, 0].sum() / base[:, 1].sum()),
                "ratio low": np.percentile(ratio, lo),
                "ratio high": np.percentile(ratio, hi),
                "copying accuracy": s[:, 2].sum() / s[:, 3].sum(),
                "copying low": np.percentile(copied, lo),
                "copying high": np.percentile(copied, hi),
                "sequences": n,
                "scored tokens": int(s[:, 1].sum()),
            }
        )
    return pd.DataFrame(out)


def fitting(points: pd.DataFrame, budget: float) -> pd.DataFrame:
    """Per method of ``METHODS``, the configuration with the most bytes within ``budget`` (+``FIT``)."""
    inside = points[points["method"].isin(METHODS) & (points["bytes share"] <= budget + FIT)]
    return inside.sort_values("bytes share").groupby("method", sort=False).tail(1)


def _nll(stats: np.ndarray) -> np.ndarray:
    """Mean NLL per scored token of ``stats`` rows (``[..., sequences, 5]`` -> ``[...]``)."""
    return stats[..., 0].sum(-1) / stats[..., 1].sum(-1)


def _copied(stats: np.ndarray) -> np.ndarray:
    return stats[..., 2].sum(-1) / stats[..., 3].sum(-1)


def pair_table(
    points: pd.DataFrame,
    rows: Mapping[str, np.ndarray],
    *,
    budgets: Sequence[float],
    n_resamples: int,
    alpha: float,
    seed: int,
) -> pd.DataFrame:
    """Per budget, every pair of methods (each at its ``fitting`` configuration): the difference in
    log-perplexity (nats per token; positive: the second method does worse) with a paired bootstrap
    interval over sequences, and the same for copying accuracy."""
    from ...heads.significance import resample_indices

    first = next(iter(rows.values()))
    indices = resample_indices(len(first), n_resamples, seed)
    lo, hi = 100 * alpha / 2, 100 * (1 - alpha / 2)
    out = []
    for budget in budgets:
        fit = fitting(points, budget).sort_values("perplexity").to_dict("records")
        for i, a in enumerate(fit):
            for b in fit[i + 1 :]:
                sa, sb = rows[f"{a['method']}: {a['setting']}"], rows[f"{b['method']}: {b['setting']}"]
                d, dc = _nll(sb[indices]) - _nll(sa[indices]), _copied(sa[indices]) - _copied(sb[indices])
                out.append(
                    {
                        "budget": budget,
                        "better": a["method"],
                        "better setting": a["setting"],
                        "better share": a["bytes share"],
                        "worse": b["method"],
                        "worse setting": b["setting"],
                        "worse share": b["bytes share"],
                        "log-perplexity gap": float(_nll(sb) - _nll(sa)),
                        "gap low": np.percentile(d, lo),
                        "gap high": np.percentile(d, hi),
                        "copying gap": float(_copied(sa) - _copied(sb)),
                        "copying gap low": np.percentile(dc, lo),
                        "copying gap high": np.percentile(dc, hi),
                    }
                )
    return pd.DataFrame(out)


def budget_table(
    points: pd.DataFrame, pairs: pd.DataFrame, budgets: Sequence[float], tolerance: float
) -> pd.DataFrame:
    """Per budget: the method with the lowest perplexity within it, the runner-up, and the gap
    between them (log-perplexity, nats per token) with its interval; ``clear`` where the gap is
    above ``tolerance`` (what the fast passes may be off by: ``fast_pass_tolerance``) and its
    interval above 0: only then is the first named the best."""
    out = []
    for budget in budgets:
        fit = fitting(points, budget).sort_values("perplexity")
        if len(fit) < 2:
            continue
        best, second = fit.iloc[0], fit.iloc[1]
        pair = pairs[
            (pairs["budget"] == budget) & (pairs["better"] == best["method"]) & (pairs["worse"] == second["method"])
        ].iloc[0]
        out.append(
            {
                "budget": budget,
                "best": best["method"],
                "best setting": best["setting"],
                "best share": best["bytes share"],
                "best perplexity": best["perplexity"],
                "runner-up": second["method"],
                "runner-up share": second["bytes share"],
                "runner-up perplexity": second["perplexity"],
                "log-perplexity gap": pair["log-perplexity gap"],
                "gap low": pair["gap low"],
                "gap high": pair["gap high"],
                "tolerance": tolerance,
                "clear": bool(pair["log-perplexity gap"] > tolerance and pair["gap low"] > 0),
                "methods within budget": len(fit),
            }
        )
    return pd.DataFrame(out)


def budget_tables(
    points: pd.DataFrame,
    rows: Mapping[str, np.ndarray],
    *,
    budgets: Sequence[float],
    tolerance: float,
    n_resamples: int,
    alpha: float,
    seed: int,
) -> dict[str, pd.DataFrame]:
    """``{"14_pairs": pair_table(...), "14_budgets": budget_table(...), "14_composition":
    composition_table(...)}``: every pair of methods at each of ``budgets`` with its paired
    bootstrap interval, each budget's best method, and whether removing groups and quantizing
    compose."""
    pairs = pair_table(points, rows, budgets=budgets, n_resamples=n_resamples, alpha=alpha, seed=seed)
    return {
        "14_pairs": pairs,
        "14_budgets": budget_table(points, pairs, budgets=budgets, tolerance=tolerance),
        "14_composition": composition_table(points),
    }


def composition_table(points: pd.DataFrame) -> pd.DataFrame:
    """One row per combined configuration (groups removed, then a 4-bit cache): its bytes share,
    perplexity ratio and interval, and ``product alone``, the ratio of the same groups removed
    times the 4-bit cache's ratio, each alone: what the two give if their costs multiply."""
    four = points[(points["method"] == QUANTIZED) & points["setting"].str.startswith("4-bit")]
    rows = []
    for _, row in points[points["method"] == COMBINED].iterrows():
        kept = row["setting"].split(",")[0]
        alone = points[(points["method"] == REMOVED) & (points["setting"] == kept)]
        if alone.empty or four.empty:
            continue
        rows.append(
            {
                "removed": kept,
                "bytes share": row["bytes share"],
                "perplexity ratio": row["perplexity ratio"],
                "ratio low": row["ratio low"],
                "ratio high": row["ratio high"],
                "product alone": alone["perplexity ratio"].iloc[0] * four["perplexity ratio"].iloc[0],
            }
        )
    columns = ["removed", "bytes share", "perplexity ratio", "ratio low", "ratio high", "product alone"]
    return pd.DataFrame(rows, columns=columns)


def raw_tables(
    configs: Sequence[Config], rows: Mapping[str, np.ndarray], floor: float, window: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """The chapter's raw data as tables: one row per configuration and sequence
    (``14_sequence_stats``), the copying accuracy of a first read (``14_floor``), the KV groups'
    attention beyond the window (``14_window_groups``, from ``window_scores``) and its median
    over the groups (``14_window_summary``)."""
    return {
        "14_sequence_stats": sequence_table(configs, rows),
        "14_floor": pd.DataFrame([{"first-read accuracy": floor}]),
        "14_window_groups": window,
        "14_window_summary": pd.DataFrame(
            [{"groups": len(window), "median beyond window": float(window["beyond window"].median())}]
        ),
    }


# ---- figures --------------------------------------------------------------------------------------------
_COLORS = {
    REMOVED: "tab:red",
    WINDOWED: "tab:green",
    QUANTIZED: "tab:blue",
    EVICTED: "tab:orange",
    COMBINED: "tab:purple",
}


def tradeoff_figure(points: pd.DataFrame, floor: float | None = None):
    """Perplexity ratio (log scale) and copying accuracy against the share of the cache's bytes,
    one line per method with its intervals; random group removal as a 5-95% bar."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    base = points[points["method"] == UNPRUNED]
    band = points[points["method"] == RANDOM]
    for ax, (value, low, high, label) in zip(
        axes,
        (
            ("perplexity ratio", "ratio low", "ratio high", "perplexity / unpruned"),
            ("copying accuracy", "copying low", "copying high", "copying accuracy"),
        ),
    ):
        for method, color in _COLORS.items():
            part = (
                pd.concat([base, points[points["method"] == method]])
                if method != COMBINED
                else points[points["method"] == method]
            )
            part = part.sort_values("bytes share")
            ax.errorbar(
                part["bytes share"] * 100,
                part[value],
                yerr=[part[value] - part[low], part[high] - part[value]],
                marker="o",
                markersize=4,
                capsize=2,
                color=color,
                label=method,
            )
        if len(band):
            share = band["bytes share"].iloc[0] * 100
            ax.vlines(
                share,
                band[value].quantile(0.05),
                band[value].quantile(0.95),
                color="black",
                linewidth=5,
                alpha=0.5,
                label=f"random groups, 5-95% ({len(band)} orders)",
            )
        ax.set(xlabel="KV-cache bytes (% of the 16-bit cache)", ylabel=label, xlim=(0, 105))
    axes[0].set_yscale("log")
    if floor is not None:
        axes[1].axhline(floor, color="grey", linestyle="--", label="reading the passage the first time")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def window_choice_figure(scores: pd.DataFrame, configs: Sequence[Config], budget: float):
    """Each KV group's attention beyond the window (layers down, groups across); framed, the
    groups that keep full context in the windowed configuration sized to ``budget``."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    chosen = chosen_groups(configuration(configs, method=WINDOWED, target=budget))

    grid = scores.pivot(index="layer", columns="group", values="beyond window")
    fig, ax = plt.subplots(figsize=(3.4, 6))
    image = ax.imshow(grid.to_numpy(), aspect="auto", cmap="viridis")
    for layer, group in chosen:
        ax.add_patch(Rectangle((group - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=1.5))
    ax.set(xlabel="KV group", ylabel="layer", xticks=range(grid.shape[1]))
    fig.colorbar(image, ax=ax, label="attention beyond the window")
    fig.tight_layout()
    return fig


def chosen_groups(config: Config) -> list[tuple[int, int]]:
    """The (layer, group) pairs a windowed configuration keeps in full."""
    return [(layer, g) for layer, row in enumerate(config.spec.full) for g, f in enumerate(row) if f]


# ---- the chapter's inputs and raw rows -----------------------------------------------------------------
@dataclass(frozen=True)
class Texts:
    """Where chapter 14's texts come from (its parameters of the same names): chapters 11-13's
    verse sets, ``select_verses`` and ``report_verses`` drawn with ``version``, ``max_words`` and
    ``seed`` as ``causal_lm.verse_texts`` draws them, whose select set gives I_h (``batch_size``
    verses a pass); and whole chapters of none of those verses' chapters, ``calibration_sequences``
    to choose the windowed heads on and ``sequences`` (at least ``min_units``, the bootstrap's
    units) to score. Every pass after I_h runs in ``dtype``."""

    select_verses: int
    report_verses: int
    calibration_sequences: int
    sequences: int
    version: str
    max_words: int
    batch_size: int
    dtype: str
    min_units: int
    seed: int


def chapter_inputs(
    language_model: str, texts: Texts, layout: Layout
) -> tuple[nn.Module, Mapping[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(model in texts.dtype, I_h, {"calibration": ids, "scored": ids})``: ``language_model``
    loaded (``registry.load_causal_lm`` with ``texts.seed``), head importance on the select
    verses in the model's own precision, then the model cast to ``texts.dtype``; and the whole
    chapters (``long_texts.draw_chapters``, laid out by ``layout``) to calibrate on and to score."""
    from ...heads.importance import head_importance
    from ...heads.significance import require_units
    from ...zoo.causal_lm import lm_batches, lm_loss, verse_texts
    from ...zoo.long_texts import draw_chapters, verse_chapters
    from ...zoo.registry import load_causal_lm

    require_units(texts.sequences, texts.min_units, "chapters")
    model, tokenizer = load_causal_lm(language_model, seed=texts.seed)
    verse_sets = {"select": texts.select_verses, "report": texts.report_verses}
    drawn = {"version": texts.version, "max_words": texts.max_words, "seed": texts.seed}
    select = verse_texts(verse_sets, **drawn)["select"]
    importance = head_importance(
        model, lm_batches(tokenizer, select, texts.batch_size), loss_fn=lm_loss, progress=False
    )
    ids = draw_chapters(
        tokenizer,
        {"calibration": texts.calibration_sequences, "scored": texts.sequences},
        layout=layout,
        version=texts.version,
        seed=texts.seed,
        exclude=verse_chapters(verse_sets, texts.version, texts.max_words, texts.seed),
    )
    return model.to(getattr(torch, texts.dtype)), importance, ids


def configuration(configs: Sequence[Config], method: str, target: float) -> Config:
    """The configuration of ``method`` sized to the budget ``target``."""
    return next(c for c in configs if c.method == method and c.target == target)


def sequence_table(configs: Sequence[Config], rows: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The raw rows every summary here is computed from: one per configuration and sequence."""
    frames = [
        pd.DataFrame(rows[c.name], columns=_STATS).assign(
            method=c.method, setting=c.setting, sequence=np.arange(len(rows[c.name]))
        )
        for c in configs
    ]
    return pd.concat(frames, ignore_index=True)[["method", "setting", "sequence", *_STATS]]


CHAPTER = "14_memory_budget"
CLAIMED_BUDGETS = (0.5, 0.25)  # "at half and at a quarter of the bytes"
_BUDGETS = " and ".join(f"{b:.0%}" for b in CLAIMED_BUDGETS)


_SHARE_GAP = 0.02  # two methods are "at equal bytes" when their shares of the cache differ by at most 2 points


def versus(pairs: pd.DataFrame, budget: float, method: str, other: str) -> str | None:
    """At ``budget``: ``method`` if its perplexity is lower than ``other``'s beyond the interval
    (the log-perplexity gap's lower end above 0), ``other`` if the reverse, ``"neither"`` when the
    interval holds 0 or their shares of the bytes differ by more than ``_SHARE_GAP`` (not equal
    bytes), None when one of them has no configuration within the budget."""
    at = pairs[(pairs["budget"] - budget).abs() < 1e-9]
    row = at[((at["better"] == method) & (at["worse"] == other)) | ((at["better"] == other) & (at["worse"] == method))]
    if row.empty:
        return None
    row = row.iloc[0]
    if abs(row["better share"] - row["worse share"]) > _SHARE_GAP:
        return "neither"
    return row["better"] if row["gap low"] > 0 else "neither"


def _beats(r: Results, method: str, other: str) -> tuple[str, str]:
    """``method`` against ``other`` at each of ``CLAIMED_BUDGETS`` (``versus``): reproduced when it
    is better at every budget; partly when each is better at one; not reproduced when ``other`` is
    better somewhere and ``method`` nowhere (the claim is made for every budget, so one clear loss
    refutes it even where another budget cannot tell); cannot tell otherwise (a gap inside its
    interval, unequal bytes, or a method with nothing within a budget, and no loss)."""
    pairs = present(r["14_pairs"], "14_pairs")
    parts, outcomes = [], []
    for budget in CLAIMED_BUDGETS:
        outcome = versus(pairs, budget, method, other)
        outcomes.append(outcome)
        at = pairs[((pairs["budget"] - budget).abs() < 1e-9)]
        row = at[at["better"].isin([method, other]) & at["worse"].isin([method, other])]
        if row.empty:
            parts.append(f"at {budget:.0%} of the bytes: not both within it")
            continue
        row = row.iloc[0]
        sign = 1 if row["better"] == method else -1
        gap, low, high = (sign * row[c] for c in ("log-perplexity gap", "gap low", "gap high"))
        low, high = sorted((low, high))
        mine, theirs = (row["better share"], row["worse share"])[::sign]
        more = "more" if gap >= 0 else "less"
        if gap < 0:  # said as a saving, its interval with it
            gap, low, high = -gap, -high, -low
        parts.append(
            f"at {budget:.0%} of the bytes ({method} {mine:.1%}, {other} {theirs:.1%}), {other} costs "
            f"{gap:.3f} nats per token {more} than {method} [{low:+.3f}, {high:+.3f}]"
        )
    wins, losses = outcomes.count(method), outcomes.count(other)
    verdict = (
        REPRODUCED
        if wins == len(outcomes)
        else PARTLY
        if wins and losses
        else NOT_REPRODUCED
        if losses and not wins
        else CANNOT_TELL
    )
    return "; ".join(parts), verdict


def quantizing_beats_removal(r: Results) -> tuple[str, str]:
    return _beats(r, QUANTIZED, REMOVED)


def quantizing_beats_eviction(r: Results) -> tuple[str, str]:
    """The comparison Zhang et al. (2024) make: more tokens at lower precision (the quantized
    cache) against fewer tokens at 16 bits (heavy hitters evicted), at equal bytes."""
    return _beats(r, QUANTIZED, EVICTED)


def windows_beat_removal(r: Results) -> tuple[str, str]:
    return _beats(r, WINDOWED, REMOVED)


def importance_beats_random_groups(r: Results) -> tuple[str, str]:
    """KV groups removed by importance at the chapter's ``band_budget`` (the budget its random
    orders were drawn at, as the chapter recorded it), against as many removed in random orders:
    reproduced when its perplexity is below every random order's (with 20 orders, chance gives
    that 1 time in 21); not reproduced when at least half the orders do as well (importance no
    better than the median random order); cannot tell between, where the rank test is not
    significant but importance still beats most orders, with fewer than ``MIN_BAND_ORDERS``
    orders, or when the orders' bytes are not importance's (within 1 point)."""
    points = present(r["14_points"], "14_points")
    band = points[points["method"] == RANDOM]
    band_budget = float(r.params.get("band_budget", Plan.band_budget))
    ours = points[(points["method"] == REMOVED) & ((points["budget"] - band_budget).abs() < 1e-9)]
    if ours.empty or band.empty:
        return "(no removal at that budget, or no random orders)", CANNOT_TELL
    ppl, share = float(ours["perplexity ratio"].iloc[0]), float(ours["bytes share"].iloc[0])
    below = int((band["perplexity ratio"] <= ppl).sum())
    text = (
        f"{share:.1%} of the bytes kept by removing KV groups by importance: perplexity x{ppl:.2f}; {len(band)} "
        "random "
        f"orders: x{band['perplexity ratio'].min():.2f} (best) to x{band['perplexity ratio'].max():.2f}, median "
        f"x{band['perplexity ratio'].median():.2f}; {below} as good or better (rank p = "
        f"{(1 + below) / (1 + len(band)):.3f})"
    )
    if len(band) < MIN_BAND_ORDERS:
        return text + f" (fewer than {MIN_BAND_ORDERS} orders: no band)", CANNOT_TELL
    if (band["bytes share"] - share).abs().max() > 0.01:
        return text + " (the random orders keep other bytes: not like with like)", CANNOT_TELL
    if below == 0:
        return text, REPRODUCED
    return text, NOT_REPRODUCED if 2 * below >= len(band) else CANNOT_TELL


def _units(r: Results) -> tuple[int, str]:
    """The whole chapters the paired intervals resample (``Claim.units``)."""
    return int(r["14_points"]["sequences"].iloc[0]), "whole chapters"


def sample(r: Results) -> str:
    points = r["14_points"]
    band = int((points["method"] == RANDOM).sum())
    row = points.iloc[0]
    return (
        f"n = {int(row['sequences'])} whole chapters ({int(row['scored tokens']):,} scored tokens), paired bootstrap "
        f"over chapters; {band} random orders"
    )


CLAIMS = [
    Claim(
        "quantizing_beats_removal",
        "Beyond the paper, KV memory",
        "At half and at a quarter of the KV-cache "
        "bytes, quantizing the cache costs less perplexity than removing KV groups",
        "quantization against fewer KV heads: Zhang et al. (2024) compare it with evicted tokens (the next claim), "
        "not with removed heads; this claim is ours",
        f"reproduced: at {' and '.join(f'{b:.0%}' for b in CLAIMED_BUDGETS)} of the bytes the quantized cache (the "
        "most bytes within the budget) has lower perplexity than removing KV groups by importance, the paired "
        "interval over chapters clear of 0 and the two within 2 points of each other's bytes; partly: at one, the "
        "reverse at the other; not reproduced: removal wins at one and quantization at neither; cannot tell: "
        "otherwise (an interval holding 0, unequal bytes, a method with nothing within a budget)",
        CHAPTER,
        quantizing_beats_removal,
        measured_on="perplexity on whole chapters, at equal bytes",
        sample=sample,
        units=_units,
    ),
    Claim(
        "quantizing_beats_eviction",
        "Beyond the paper, KV memory",
        "At half and at a quarter of the KV-cache bytes, quantizing the cache costs less perplexity than evicting "
        "tokens",
        "at equal memory, more tokens at lower precision beat fewer tokens at 16 bits (Zhang et al. 2024, 7-8B "
        "models: their comparison)",
        "as the claim above, the quantized cache against heavy hitters evicted (the most bytes of each within the "
        "budget)",
        CHAPTER,
        quantizing_beats_eviction,
        measured_on="perplexity on whole chapters, at equal bytes",
        sample=sample,
        units=_units,
    ),
    Claim(
        "windows_beat_removal",
        "Beyond the paper, KV memory",
        "Keeping full context in the KV groups that need "
        "it (and a window in the rest) beats removing KV groups at equal bytes",
        "streaming heads cut the cache 1.67-2.55x at little loss (DuoAttention, Xiao et al. 2024)",
        "as the claim above, windowed heads against KV groups removed",
        CHAPTER,
        windows_beat_removal,
        measured_on="perplexity on whole chapters, at equal bytes",
        sample=sample,
        units=_units,
    ),
    Claim(
        "importance_beats_random_groups",
        "Beyond the paper, KV memory",
        "At half the KV-cache bytes, KV groups removed by importance cost less than groups removed at random "
        "(the one budget the random band is drawn at)",
        "importance keeps the score far longer than random (§4.2)",
        f"reproduced: at {{band_budget:.0%}} of the bytes, perplexity below that of every random order removing as "
        f"many groups (a rank test: 1 in 21 by chance with 20 orders); not reproduced: at least half the random "
        f"orders as good (no better than the median order); cannot tell: fewer orders as good, fewer than "
        f"{MIN_BAND_ORDERS} orders, orders keeping other bytes, or no removal at that budget",
        CHAPTER,
        importance_beats_random_groups,
        parameters={"band_budget": Plan.band_budget},
        measured_on="perplexity on whole chapters",
        sample=sample,
    ),
]


def setting_lines(tables: ChapterTables) -> list[str]:
    points, checks = tables["14_points"], tables["14_checks"]
    base = points[points["method"] == UNPRUNED].iloc[0]
    exact = int((checks["bytes, measured"] == checks["bytes, predicted"]).sum())
    fast = checks[checks["method"] != EVICTED]  # heavy hitters are scored with their real cache
    quantized = fast["method"].isin(QUANTIZING)  # by method: the plain "16-bit cache" holds no codes
    tolerance = float(tables["14_budgets"]["tolerance"].iloc[0])  # fast_pass_tolerance, as the rule read it
    gaps = fast["largest sequence gap, float32"]
    prompt = points["prompt bytes share"]
    return [
        f"**The setting:** {int(base['sequences'])} whole chapters, {int(base['scored tokens']):,} scored tokens; the "
        f"unpruned model's perplexity on them is {base['perplexity']:.2f} and it copies the repeated passage with "
        f"accuracy {base['copying accuracy']:.2f}. Its 16-bit cache holds {base['bytes per token']:,.0f} bytes per "
        f"token. **Checked against the real caches** ({int(fast['sequences'].iloc[0])} chapters read one position "
        f"at a time, {len(checks)} configurations): the bytes measured equal the arithmetic for {exact} of "
        f"{len(checks)}. In 16 bits the two ways of the caches that hold 16-bit values differ by up to "
        f"{tolerance:.4f} nats a chapter (rounding alone): the tolerance. In float32 each fast pass is within it of "
        f"its real cache, in {int(gaps.notna().sum())} configurations: one of each way a fast pass is computed, and "
        f"every quantized cache. The caches that do not quantize agree to {gaps[~quantized].max():.0e} nats, the "
        f"quantized ones to {gaps[quantized].max():.4f}: a key's last bit, computed in a matrix product of another "
        "shape, can cross a code's boundary. In 16 bits the quantized caches' two ways differ by up to "
        f"{fast.loc[quantized, 'largest sequence gap, 16-bit'].max():.4f} nats a chapter. Their codes follow the "
        "last bit of a key, so a quantized cache's perplexity is known to about that. **While the prompt is read**, "
        "in one pass, every configuration holds its own KV heads' 16-bit keys and values for the whole prompt "
        f"({prompt.min():.0%} to {prompt.max():.0%} of the plain cache's bytes). The bytes axis counts what each "
        "cache holds from the next position on."
    ]


def _budget_lines(tables: ChapterTables) -> list[str]:
    budgets = tables["14_budgets"]
    lines = []
    for row in budgets.to_dict("records"):
        named = (
            f"Best: {row['best']}"
            if row["clear"]
            else f"No clear best, since the gap is within the tolerance of {row['tolerance']:.4f} nats or its "
            f"interval holds 0. Lowest: {row['best']}"
        )
        lines.append(
            f"**{row['budget']:.0%} of the bytes.** {named} ({row['best setting']}, "
            f"{percent(row['best share'])} of the bytes, perplexity {row['best perplexity']:.2f}). Runner-up: "
            f"{row['runner-up']} ({percent(row['runner-up share'])}, {row['runner-up perplexity']:.2f}). Gap: "
            f"{row['log-perplexity gap']:+.3f} nats per token [{row['gap low']:+.3f}, {row['gap high']:+.3f}]."
        )
    return lines


def copying_lines(tables: ChapterTables) -> list[str]:
    points = tables["14_points"]
    floor = tables["14_floor"]["first-read accuracy"].iloc[0]
    parts = []
    for method in (REMOVED, WINDOWED, QUANTIZED):
        part = points[points["method"] == method].sort_values("bytes share")
        if len(part):
            parts.append(
                f"* {method}: "
                + ", ".join(f"{r['copying accuracy']:.2f} at {percent(r['bytes share'])}" for _, r in part.iterrows())
            )
    return [
        f"**Copying the repeated passage.** The model reading it for the first time gets {floor:.2f} right. "
        "Copying accuracy by the share of the bytes kept:\n\n" + "\n".join(parts)
    ]


def _composition_lines(tables: ChapterTables) -> list[str]:
    """Whether removing groups and quantizing compose (``14_composition``): the combined
    perplexity ratio against the product of the two alone."""
    out = [
        f"{row['removed']} and 4-bit ({percent(row['bytes share'])} of the bytes): perplexity "
        f"x{row['perplexity ratio']:.3f} [{row['ratio low']:.3f}, {row['ratio high']:.3f}], against "
        f"x{row['product alone']:.3f} from the two alone multiplied"
        for _, row in tables["14_composition"].iterrows()
    ]
    return [f"**Do they compose?** {words(out)}."] if out else []


def _window_lines(tables: ChapterTables) -> list[str]:
    scores = tables["14_window_groups"].sort_values("rank")
    top = [
        f"{shown(r['layer'])}.{shown(r['group'])} ({r['beyond window']:.2f})"
        for r in scores.head(5).to_dict("records")
    ]
    return [
        f"**Where windowed heads keep full context:** the groups that read most beyond the window (layer.group, "
        f"attention beyond it) are {words(top)}; the median group puts "
        f"{tables['14_window_summary']['median beyond window'].iloc[0]:.2f} of its attention there."
    ]


def findings(tables: ChapterTables) -> str:
    return "\n\n".join(
        setting_lines(tables)
        + _budget_lines(tables)
        + copying_lines(tables)
        + _composition_lines(tables)
        + _window_lines(tables)
    )
