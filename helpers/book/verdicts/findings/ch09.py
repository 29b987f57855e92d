"""Chapter 09's "What this run shows" paragraph (see ``helpers.book.verdicts.findings``)."""

from __future__ import annotations

from ...experiments.dynamics import MIN_BASE_SHARE, at_share_by_epoch, usable_epochs
from .text import read, words


def findings(profile: str, min_base_share: float = MIN_BASE_SHARE) -> str:
    """Chapter 09's findings: per seed, what pruning 40% costs at the first and the last analysed
    epoch, as a share of the BLEU kept (over the epochs whose unpruned BLEU is at least
    ``min_base_share`` of the last one's, as the chapter's verdict; the others are named) and as the
    perplexity reached, and the first usable epoch that keeps the paper's share."""
    from ...paper.values import FIGURE5_BLEU, FIGURE5_EPOCH_PRUNABLE, FIGURE5_KEPT_AT_40

    bleu = read(profile, "09_importance_dynamics")
    ll = read(profile, "09_importance_dynamics_likelihood")

    lines = []
    for seed, run in bleu.groupby("training_seed"):
        bases = run.drop_duplicates("epoch").set_index("epoch")["unpruned"].sort_index()
        usable = usable_epochs(run, min_base_share)
        skipped = [int(e) for e in bases.index if e not in usable]
        ratio = at_share_by_epoch(ll[ll["training_seed"] == seed], "perplexity_ratio")
        text = (
            f"**Seed {int(seed)}:** with 40% of the heads pruned by importance, the perplexity reaches "
            f"x{ratio.iloc[0]:.2f} of the unpruned checkpoint's after epoch {ratio.index[0]} and "
            f"x{ratio.iloc[-1]:.2f} "
            f"after epoch {ratio.index[-1]}"
        )
        if skipped:
            text += (
                f" (BLEU leaves out epoch{'s' * (len(skipped) > 1)} {words([str(e) for e in skipped])}, whose "
                "unpruned "
                f"BLEU is below {min_base_share:.0%} of the last epoch's: a share of a near-zero BLEU is noise)"
            )
        if not usable:
            lines.append(text + "; no checkpoint has a usable BLEU, so BLEU cannot tell.")
            continue
        kept = at_share_by_epoch(run, "relative").loc[usable]
        first, last = kept.index[0], kept.index[-1]
        if first == last:
            lines.append(
                text + f"; only epoch {first} has a usable BLEU ({bases[first]:.1f}), of which {kept.iloc[0]:.0%} "
                "is kept, so BLEU cannot compare early with late."
            )
            continue
        early_ll, early_bleu = ratio.iloc[0] > ratio.iloc[-1], kept.iloc[0] < kept.iloc[-1]
        lines.append(
            text + f"; on greedy BLEU, {kept.iloc[0]:.0%} is kept after epoch {first} (BLEU {bases[first]:.1f}) "
            f"and {kept.iloc[-1]:.0%} after epoch {last} (BLEU {bases[last]:.1f}). Pruning "
            + (
                "cost more at the first of these checkpoints than at the last on both scores."
                if early_ll and early_bleu
                else "cost more at the first of these checkpoints than at the last on the likelihood only."
                if early_ll
                else "cost more at the first of these checkpoints than at the last on BLEU only."
                if early_bleu
                else "did not cost more at the first of these checkpoints than at the last on either score."
            )
            + f" The first of them to keep {FIGURE5_KEPT_AT_40[0]:.0%} with 40% pruned: "
            + (
                f"epoch {next(e for e in kept.index if kept[e] >= FIGURE5_KEPT_AT_40[0])}"
                if (kept >= FIGURE5_KEPT_AT_40[0]).any()
                else "none"
            )
            + f" of {int(bases.index.max())} (the paper: about epoch {FIGURE5_EPOCH_PRUNABLE} of {max(FIGURE5_BLEU)})."
            + " One checkpoint each, no interval: the verdict table above says what the rules make of it."
        )
    return "\n\n".join(lines)
