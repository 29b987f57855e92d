"""The "What this run shows" paragraphs of the chapters, written from the run's own result tables.

A paragraph that quotes numbers by hand goes stale the moment a reader reruns a chapter with
another model, profile or seed. Each function here reads the tables a chapter has just saved
under ``results/<profile>/`` and returns Markdown whose every number comes from them; the
chapter displays it in its last cell. The static text around it keeps only what does not change.

Counts are stated per training seed, beside what chance alone gives (a test at p < alpha flags
about alpha of the heads that have no effect), and once per measure: the paper's metric
(BLEU, accuracy) and the likelihood (``head_effects``).

The text states numbers; it judges no claim of the paper. Where a chapter tests one, its
paragraphs end with the scorecard's verdicts (``scorecard.chapter_verdicts``), so a chapter
and the scorecard can never disagree.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import pandas as pd

from .results import results_dir
from .scorecard import MEASURES as MEASURE_NAMES
from .scorecard import MIN_BASE_SHARE, chapter_verdicts, ours, usable_epochs, verdict_sentences

MEASURES = tuple(MEASURE_NAMES.items())  # (table suffix, the measure's one name)


def read(profile: str, name: str) -> pd.DataFrame:
    """``results/<profile>/<name>.csv``; a clear error when the chapter has not saved it yet."""
    path = results_dir(profile) / f"{name}.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run the chapter that saves {name!r} on profile {profile!r} first")
    return pd.read_csv(path)


def words(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _r(value: float) -> str:
    return "undefined" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def verdicts(profile: str, chapter: str) -> str:
    """The scorecard's verdicts on ``chapter``'s claims, as a paragraph."""
    return "**The scorecard's verdicts:** " + verdict_sentences(chapter_verdicts(profile, chapter))


def _split_half(effects: pd.DataFrame) -> dict[int, float]:
    """Training seed -> Pearson r between the masked scores on the even and the odd examples."""
    out = {}
    for seed, part in effects.groupby("training_seed"):
        a, b = part["score_even"].astype(float), part["score_odd"].astype(float)
        out[int(seed)] = float("nan") if len(part) < 3 or a.std() == 0 or b.std() == 0 else float(a.corr(b))
    return out


def beyond_chance(count: int, heads: int, alpha: float, level: float = 0.01) -> bool:
    """Whether ``count`` significant heads of ``heads`` are more than tests at level ``alpha``
    flag by chance alone: P(Binomial(heads, alpha) >= count) < ``level``."""
    from scipy.stats import binom

    return bool(binom.sf(count - 1, heads, alpha) < level)


def _model_name(counts: pd.DataFrame) -> Iterable[tuple[str, pd.DataFrame]]:
    for model, part in counts.groupby("model", sort=False):
        yield str(model), part


# ---- chapter 03 --------------------------------------------------------------------------------
def chapter_03(profile: str, alpha: float) -> str:
    """Chapter 03's findings: per model, measure and seed, the heads significant alone against
    chance, the gains among them, and the split-half r of the one-head effects."""
    lines = []
    for suffix, measure in MEASURES:
        counts = ours(read(profile, f"03_one_head_counts{suffix}"))
        effects = {track: read(profile, f"03_one_head_{track}{suffix}") for track in ("classifier", "translation")}
        for name, part in _model_name(counts):
            per_seed = part.groupby("training_seed", sort=True)
            heads = int(per_seed["heads"].sum().iloc[0])
            sig = {int(s): int(p["significant"].sum()) for s, p in per_seed}
            up = {int(s): int(p["significant_up"].sum()) for s, p in per_seed}
            where = {int(s): [k for k, n in zip(p["kind"], p["significant"]) if n] for s, p in per_seed}
            half = _split_half(effects["classifier" if set(part["kind"]) == {"self"} else "translation"])
            chance = alpha * heads
            seeds = sorted(sig)
            above = [s for s in seeds if beyond_chance(sig[s], heads, alpha)]
            text = (f"**{name}, {measure}:** {words([str(sig[s]) for s in seeds])} of {heads} heads change the "
                    f"score significantly when masked alone (training seed{'s' if len(seeds) > 1 else ''} "
                    f"{words([str(s) for s in seeds])}), against {chance:.1f} expected by chance at p < {alpha}")
            kinds = sorted({k for s in seeds for k in where[s]})
            if len(kinds) > 1 or (kinds and kinds != ["self"]):
                text += f" (in {words(kinds)})"
            text += f" ({words([f'{sig[s] / heads:.0%}' for s in seeds])} of the heads; the paper: 8 of 96)"
            if not above:
                text += ("; on no seed more than chance alone would flag (binomial test, p < 0.01): on this measure "
                         "the one-head effects are not seen")
            elif len(above) < len(seeds):
                text += (f"; only on seed{'s' if len(above) > 1 else ''} {words(above)} more than chance alone would flag "
                         "(binomial test, p < 0.01)")
            else:
                text += "; on every seed more than chance alone would flag (binomial test, p < 0.01)"
            gains = [s for s in seeds if up[s] > 0]
            text += (". Significant gains from removing a head (the paper: 4 of its 8): "
                     + ("none" if not gains else "; ".join(f"{up[s]} on seed {s}" for s in gains)) + ".")
            text += (f" The split-half r of the effects (even against odd examples): "
                     f"{words([_r(half[s]) for s in seeds])}")
            weak = [s for s in seeds if not half[s] >= 0.5]
            text += ("; the halves agree, so the effects are properties of the heads." if not weak else
                     f"; below 0.5 on seed{'s' if len(weak) > 1 else ''} {words(weak)}: there a head's effect on "
                     "half of the examples barely predicts it on the other half, and a count near chance is noise.")
            lines.append(text)
    return "\n\n".join(lines + [verdicts(profile, "03_ablating_one_head")])


# ---- chapter 04 --------------------------------------------------------------------------------
def chapter_04(profile: str) -> str:
    """Chapter 04's findings: per model, protocol, measure and seed, the layers that keep their
    score with one head, and the worst layer."""
    lines = []
    for suffix, measure in MEASURES:
        counts = ours(read(profile, f"04_keep_one_counts{suffix}"))
        for (source, protocol), part in counts.groupby(["source", "protocol"], sort=False):
            name = str(source)
            kept, worst = [], []
            for seed, rows in part.groupby("training_seed", sort=True):
                layers, down = int(rows["layers"].sum()), int(rows["significant_down"].sum())
                kept.append(f"{layers - down} of {layers}")
                w = rows.loc[rows["worst_delta"].idxmin()]
                worst.append(f"{w['kind']} layer {int(w['worst_layer'])} ({w['worst_delta']:+.2f} {w['unit']}, seed {int(seed)})")
            kinds = {w.split(" layer")[0] for w in worst}
            lines.append(f"**{name}, {protocol}, {measure}:** {words(kept)} layers show no significant loss with a single "
                         f"head (seed by seed); the worst layer is {words(worst)}"
                         + (f" - always {kinds.pop()}." if len(kinds) == 1 else "."))
    return "\n\n".join(lines + [verdicts(profile, "04_keeping_one_head")])


# ---- chapter 05 --------------------------------------------------------------------------------
def chapter_05(profile: str) -> str:
    """Chapter 05's findings: per model, measure and seed, the cross-domain r (all heads pooled)
    with its significance, and the split-half r that bounds it."""
    lines = []
    for suffix, measure in MEASURES:
        table = read(profile, f"05_cross_domain_r{suffix}")
        pooled = table[table["paper_r"].notna()]
        for model, part in pooled.groupby("model", sort=False):
            name = str(model)
            part = part.sort_values("training_seed")
            rs = [f"{_r(r)} (p = {p:.2g})" if not math.isnan(r) else "undefined" for r, p in zip(part["pearson_r"], part["p_value"])]
            halves = [f"{_r(a)}/{_r(b)}" for a, b in zip(part["split_half_r_in"], part["split_half_r_out"])]
            seeds = [int(s) for s in part["training_seed"]]
            lines.append(f"**{name}, {measure}:** r = {words(rs)} across domains (seeds {words(seeds)}; the paper: "
                         f"{part['paper_r'].iloc[0]:.2f}). The split-half r, in-domain/out-of-domain: {words(halves)}.")
    return "\n\n".join(lines + [verdicts(profile, "05_cross_domain")])


# ---- chapter 12 --------------------------------------------------------------------------------
def scorecard_summary(card: pd.DataFrame) -> str:
    """The scorecard's tallies on both measures, and the claims where they disagree."""
    from .scorecard import NOT_MEASURED, disagreements, verdict_counts

    def tally(column: str) -> str:
        counts = {v: n for v, n in verdict_counts(card, column).items() if n}
        return words([f"{n} {v}" for v, n in counts.items()])

    measured = int((card["likelihood verdict"] != NOT_MEASURED).sum())
    text = (f"On the paper's metric, {tally('verdict')} of the {len(card)} claims. On the likelihood, measured for "
            f"{measured} of them: {tally('likelihood verdict')}.")
    split = disagreements(card)
    if split.empty:
        return text + " Where both were measured, the two scores give the same verdict on every claim."
    items = [f"*{c}* ({v} on the paper's metric, {lv} on the likelihood)"
             for c, v, lv in zip(split["claim"], split["verdict"], split["likelihood verdict"])]
    return text + f" The two scores disagree on {len(items)}: " + "; ".join(items) + "."


# ---- chapter 07 --------------------------------------------------------------------------------
def chapter_07(profile: str) -> str:
    """Chapter 07's findings: the measured speed-ups (ratios of median rates) at each batch size
    against the FLOP prediction and the paper's, the gated model against the timing noise, and
    the precision table's rows."""
    from .paper_values import TABLE4_SPEEDUP
    from ..heads.throughput import speed_gains

    speed = read(profile, "07_speed")
    gains = speed_gains(speed).set_index("batch_size")
    sizes = list(gains.index)
    small, large = sizes[0], sizes[-1]
    at_large = speed[speed["batch_size"] == large].set_index("variant")
    noise = max(at_large.loc[v, "iqr"] / at_large.loc[v, "median"] for v in ("original", "gated"))
    g = gains.loc[large]
    text = (f"On {speed['device'].iloc[0]}, removing the heads made the classifier {g['pruned']:+.1%} faster at batch "
            f"{large} (median of the timed passes), against {g['predicted']:+.1%} predicted by the removed FLOPs "
            f"({g['share_of_predicted']:.0%} of the prediction realised) and the paper's {TABLE4_SPEEDUP[64]:+.1%} at 64 "
            f"on a GPU. At batch {small} it gained {gains.loc[small, 'pruned']:+.1%} (the paper: "
            f"{TABLE4_SPEEDUP[1]:+.1%} at batch 1), " + ("less than at the largest batch. "
                                                          if gains.loc[small, "pruned"] < g["pruned"] else
                                                          "no less than at the largest batch. ")
            + f"The gated model ran {g['gated']:+.1%} against the original at batch {large}, with a timing noise "
            f"(interquartile range over median) of {noise:.1%}: "
            + ("masking saves nothing beyond the noise, as masking should." if g["gated"] < max(0.05, noise) else
               "faster than the noise allows, which the timing should be checked for."))
    try:
        precision = speed_gains(read(profile, "07_precision"))
    except FileNotFoundError:
        return text + "\n\n" + verdicts(profile, "07_pruning_speed")
    rows = [f"{r.dtype} {r.compile_mode} at batch {r.batch_size}: {r.pruned:+.1%} (predicted {r.predicted:+.1%})"
            for r in precision.itertuples()]
    return (text + " In the precision table, the pruned model's speed-up was " + words(rows) + ".\n\n"
            + verdicts(profile, "07_pruning_speed"))


def _pct_list(values: Iterable[float]) -> str:
    return words([f"{v:.0%}" for v in values])


# ---- chapter 06 --------------------------------------------------------------------------------
def chapter_06(profile: str) -> str:
    """Chapter 06's findings: per measure and model, the share prunable by importance, ablation
    and random orders on every seed, and how pruning everything ends."""
    lines = []
    for suffix, measure in MEASURES:
        table = read(profile, f"06_prunable_shares{suffix}")
        for (track, model), part in table.groupby(["track", "model"], sort=False):
            by = {o: p.sort_values("training_seed") for o, p in part.groupby("order")}
            imp, abl, rnd = by["importance"], by["ablation"], by["random (mean)"]
            seeds = [int(s) for s in imp["training_seed"]]
            wins = sum(i >= a for i, a in zip(imp["prunable_share"], abl["prunable_share"]))
            beats = sum(i > r for i, r in zip(imp["prunable_share"], rnd["prunable_share"]))
            paper = imp["paper_prunable_share"].iloc[0]
            lines.append(
                f"**{model}, {measure}:** by importance, {_pct_list(imp['prunable_share'])} of the heads can go with no "
                f"noticeable loss (seed{'s' if len(seeds) > 1 else ''} {words([str(s) for s in seeds])}; the paper: "
                f"{paper:.0%}), by the one-head ablation order {_pct_list(abl['prunable_share'])}, at random "
                f"{_pct_list(rnd['prunable_share'])}. Importance prunes at least as much as ablation on {wins} of "
                f"{len(seeds)} seeds and more than random on {beats} of {len(seeds)}. With every head pruned the score is "
                f"{words([f'{v:.3g}' for v in imp['all_pruned']])}, against {words([f'{v:.3g}' for v in imp['unpruned']])} "
                "unpruned.")
    return "\n\n".join(lines + [verdicts(profile, "06_pruning_curves")])


# ---- chapter 08 --------------------------------------------------------------------------------
def chapter_08(profile: str) -> str:
    """Chapter 08's findings: per seed, the attention kind that suffers most at 80% pruned, on
    BLEU (share kept) and on the likelihood (perplexity reached)."""
    bleu = read(profile, "08_pruning_by_kind_summary")
    ll = read(profile, "08_pruning_by_kind_summary_likelihood")
    lines = []
    for seed, part in bleu.groupby("training_seed"):
        kept = ", ".join(f"{k} {v:.0%}" for k, v in zip(part["kind"], part["relative_80%"]))
        worst = part.loc[part["relative_80%"].idxmin(), "kind"] if part["relative_80%"].notna().any() else "undefined"
        mine = ll[ll["training_seed"] == seed]
        ratios = ", ".join(f"{k} x{v:.2f}" for k, v in zip(mine["kind"], mine["perplexity_ratio_80%"]))
        worst_ll = mine.loc[mine["perplexity_ratio_80%"].idxmax(), "kind"] if mine["perplexity_ratio_80%"].notna().any() \
            else "undefined"
        lines.append(f"**Seed {int(seed)}:** with 80% of a kind's heads pruned, the share of the BLEU kept is {kept} "
                     f"(most sensitive: {worst}); "
                     f"the perplexity reaches {ratios} times the unpruned model's (most sensitive: {worst_ll}"
                     ").")
    return "\n\n".join(lines + [verdicts(profile, "08_attention_kinds")])


# ---- chapter 09 --------------------------------------------------------------------------------
def chapter_09(profile: str, min_base_share: float = MIN_BASE_SHARE) -> str:
    """Chapter 09's findings: per seed, what pruning 40% costs at the first and the last analysed
    epoch, as a share of the BLEU kept (over the epochs whose unpruned BLEU is at least
    ``min_base_share`` of the last one's, as the chapter's verdict) and as the perplexity reached."""
    from .scorecard import at_share_by_epoch as at40

    bleu = read(profile, "09_importance_dynamics")
    ll = read(profile, "09_importance_dynamics_likelihood")

    lines = []
    for seed, run in bleu.groupby("training_seed"):
        bases = run.drop_duplicates("epoch").set_index("epoch")["unpruned"].sort_index()
        usable = usable_epochs(run, min_base_share)
        ratio = at40(ll[ll["training_seed"] == seed], "perplexity_ratio")
        text = (f"**Seed {int(seed)}:** with 40% of the heads pruned by importance, the perplexity reaches "
                f"x{ratio.iloc[0]:.2f} of the unpruned checkpoint's after epoch {ratio.index[0]} and x{ratio.iloc[-1]:.2f} "
                f"after epoch {ratio.index[-1]}")
        if not usable:
            lines.append(text + "; no checkpoint has a usable BLEU, so BLEU cannot tell.")
            continue
        kept = at40(run, "relative").loc[usable]
        first, last = kept.index[0], kept.index[-1]
        if first == last:
            lines.append(text + f"; only epoch {first} has a usable BLEU ({bases[first]:.1f}), of which {kept.iloc[0]:.0%} "
                         "is kept, so BLEU cannot compare early with late.")
            continue
        early_ll, early_bleu = ratio.iloc[0] > ratio.iloc[-1], kept.iloc[0] < kept.iloc[-1]
        lines.append(text + f"; on greedy BLEU, {kept.iloc[0]:.0%} is kept after epoch {first} (BLEU {bases[first]:.1f}) "
                     f"and {kept.iloc[-1]:.0%} after epoch {last} (BLEU {bases[last]:.1f}). Pruning "
                     + ("costs more early than late on both scores." if early_ll and early_bleu else
                        "costs more early than late on the likelihood only." if early_ll else
                        "costs more early than late on BLEU only." if early_bleu else
                        "does not cost more early than late on either score."))
    return "\n\n".join(lines + [verdicts(profile, "09_training_dynamics")])


# ---- chapter 10 --------------------------------------------------------------------------------
def chapter_10(profile: str) -> str:
    """Chapter 10's findings: per task, the share prunable within tolerance on every seed, on the
    task's metric and on the likelihood, beside the paper's flat stretch."""
    bleu = read(profile, "10_appendix_summary")
    ll = read(profile, "10_appendix_summary_likelihood")
    lines = []
    for model, part in bleu.groupby("model", sort=False):
        mine = ll[ll["model"] == model].sort_values("training_seed")
        part = part.sort_values("training_seed")
        paper = part["paper_flat_until"].iloc[0]
        versus = "" if pd.isna(paper) else f" (the paper's {part['paper_task'].iloc[0]}: flat to about {paper:.0%})"
        lines.append(f"**{model}:** {_pct_list(part['prunable_share'])} of the heads can go within the tolerance on "
                     f"{part['metric'].iloc[0]}, {_pct_list(mine['prunable_share'])} with the perplexity within 1%"
                     f"{versus}.")
    return "\n\n".join(lines + [verdicts(profile, "10_appendix_more_tasks")])


# ---- chapter 11 --------------------------------------------------------------------------------
def chapter_11(profile: str, alpha: float) -> str:
    """Chapter 11's findings (one language model, one draw of verses): the one-head grid against
    chance, the layers that keep their perplexity with one head, the prunable shares and the
    speed-up against the FLOP prediction."""
    from ..heads.throughput import speed_gains

    sets = read(profile, "11_sets").set_index("set")
    grid = read(profile, "11_one_head_grid")
    keep = read(profile, "11_keep_one_head")
    shares = read(profile, "11_prunable_shares").set_index(["unit", "order"])
    gains = speed_gains(read(profile, "11_speed")).set_index("batch_size")
    worse = grid[grid["significant"] & (grid["change_pct"] > 0)]
    better = grid[grid["significant"] & (grid["change_pct"] < 0)]
    top = grid.loc[grid["change_pct"].idxmax()]
    kept = keep[~keep["significant"]]
    lines = [
        f"The model's perplexity on the verses is {sets.loc['select', 'perplexity']:.1f} (select set, "
        f"{int(sets.loc['select', 'verses'])} verses) and {sets.loc['report', 'perplexity']:.1f} (report set).",
        f"**One head masked:** {len(worse)} of {len(grid)} query heads raise the perplexity significantly and "
        f"{len(better)} lower it significantly, against {alpha * len(grid):.1f} expected by chance; "
        f"{int((grid['change_pct'].abs() < 1).sum())} change it by less than 1%. The largest rise is "
        f"{top['change_pct']:+.1f}% (layer {int(top['layer'])}, head {int(top['head'])}); the significant heads are in "
        f"{grid.loc[grid['significant'], 'layer'].nunique()} of the {grid['layer'].nunique()} layers.",
        f"**One head kept:** {len(kept)} of {len(keep)} layers lose nothing significant with a single query head; "
        f"the median layer changes the perplexity by {keep['change_pct'].median():+.0f}% and the worst by "
        f"{keep['change_pct'].max():+.0f}% (layer {int(keep.loc[keep['change_pct'].idxmax(), 'layer'])}).",
    ]
    for unit in ("query heads", "KV groups"):
        imp = shares.loc[(unit, "importance")]
        rand = shares.loc[unit].drop("importance")
        lines.append(f"**Pruning {unit} by importance:** {imp['prunable within 1%']:.0%} can go with the perplexity within "
                     f"1% of the unpruned model's and {imp['prunable within 10%']:.0%} within 10%; at half pruned the "
                     f"perplexity is {imp['perplexity at 50%']:.1f}, against {rand['perplexity at 50%'].mean():.1f} for "
                     "random orders.")
    big, small = gains.index.max(), gains.index.min()
    lines.append(f"**Speed:** with the least important half of the query heads removed, the model is "
                 f"{gains.loc[big, 'pruned']:+.1%} faster at batch {big} ({gains.loc[big, 'share_of_predicted']:.0%} of the "
                 f"{gains.loc[big, 'predicted']:+.1%} its FLOPs predict) and {gains.loc[small, 'pruned']:+.1%} at batch "
                 f"{small}; the gated model runs {gains.loc[small, 'gated']:+.1%} and {gains.loc[big, 'gated']:+.1%} "
                 "against the original (medians of the timed passes).")
    return "\n\n".join(lines)
