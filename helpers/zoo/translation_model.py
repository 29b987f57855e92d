"""Build, train, save and decode a fairseq Transformer on tokenised sentence pairs.

Training follows the paper's IWSLT recipe (the authors' ``train_iwslt.sh``) scaled down: fairseq's Adam (0.9,
0.98) with its decoupled weight decay (``optimizer_for``), inverse square-root schedule (or a
cosine to 0, ``schedule``) after a linear warm-up from ``warmup_init_lr``, label-smoothed
cross-entropy (0.1), dropout, batches capped by a token count. A checkpoint is written after
every epoch (Section 6 studies them), each in ``helpers.save_pruned``'s format, plus a resumable
``last.pt`` (model, optimiser, schedule and random states).

Decoding: beam 5, length penalty 1.0, at most ``max_len_a * source length + max_len_b`` tokens,
by default fairseq's flat 200 (``max_len_a`` 0, ``max_len_b`` 200: the authors ran fairseq's
defaults), with fairseq's own SequenceGenerator.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from ..base.atomic import atomic_path
from ..base.devices import to_device
from ..base.fairseq_compat import import_fairseq

_SCHEDULES = ("inverse_sqrt", "cosine")  # the learning rate after the warm-up (``learning_rate``)
DECAYS = ("decoupled", "coupled")  # how weight decay enters the update (``optimizer_for``)
# decoding stops at MAX_LEN_A * source length + MAX_LEN_B tokens: fairseq's defaults, which the
# authors ran
MAX_LEN_A = 0.0
MAX_LEN_B = 200


@dataclass(frozen=True)
class TranslationConfig:
    arch: str = "transformer_iwslt_de_en"
    layers: int = 6
    heads: int = 8
    embed_dim: int = 128
    ffn_dim: int = 256
    normalize_before: bool = True  # pre-norm, as the authors' IWSLT model
    dropout: float = 0.1
    attention_dropout: float = 0.1
    epochs: int = 16
    max_tokens: int = 2000
    lr: float = 1e-3
    warmup_updates: int = 300
    warmup_init_lr: float = 1e-7
    schedule: str = (
        "inverse_sqrt"  # after the warm-up: fairseq's inverse_sqrt, or "cosine" down to 0 at the last update
    )
    label_smoothing: float = 0.1
    weight_decay: float = 1e-4
    # how weight decay enters Adam (``optimizer_for``): fairseq's way, as the authors trained, or
    # "coupled" (torch.optim.Adam's L2, this project's recipe before; chapter 02's ablation)
    decay: str = "decoupled"
    max_positions: int = 256  # longest source or target, in tokens (subword units)
    seed: int = 0
    # the decoder's input embedding and output projection one matrix (fairseq's
    # share_decoder_input_output_embed); the authors' IWSLT script does not ask for it, so the
    # paper profile sets False; the course's small model keeps it (chapter 02 says why)
    tie_decoder_embeddings: bool = True

    def __post_init__(self):
        if self.schedule not in _SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r} in the translation recipe; use one of {_SCHEDULES}")
        if self.decay not in DECAYS:
            raise ValueError(f"unknown decay {self.decay!r} in the translation recipe; use one of {DECAYS}")


def fairseq_args(arch: str = "transformer", **overrides) -> argparse.Namespace:
    """The args of a registered fairseq architecture (e.g. ``transformer_iwslt_de_en`` or the
    paper's WMT ``transformer_vaswani_wmt_en_de_big``) with ``overrides`` applied first, so the
    architecture fills in only what is not overridden."""
    import_fairseq()
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from fairseq.models.transformer import TransformerModel

    parser = argparse.ArgumentParser()
    TransformerModel.add_args(parser)
    args = parser.parse_args([])
    for key in list(vars(args)):
        if getattr(args, key) is None or key in overrides:
            delattr(args, key)
    for key, value in overrides.items():
        setattr(args, key, value)
    ARCH_CONFIG_REGISTRY[arch](args)
    args.arch = arch
    return args


def build_dictionary(sentences: Sequence[str]):
    """A fairseq Dictionary of every whitespace token in ``sentences`` (specials first)."""
    import_fairseq()
    from fairseq.data import Dictionary

    d = Dictionary()
    for s in sentences:
        for w in s.split():
            d.add_symbol(w)
    d.finalize(padding_factor=8)
    return d


def build_model(config: TranslationConfig, src_dict, tgt_dict) -> nn.Module:
    import_fairseq()
    from fairseq.models.transformer import TransformerModel

    torch.manual_seed(config.seed)
    args = fairseq_args(
        config.arch,
        encoder_layers=config.layers,
        decoder_layers=config.layers,
        encoder_attention_heads=config.heads,
        decoder_attention_heads=config.heads,
        encoder_embed_dim=config.embed_dim,
        decoder_embed_dim=config.embed_dim,
        encoder_ffn_embed_dim=config.ffn_dim,
        decoder_ffn_embed_dim=config.ffn_dim,
        encoder_normalize_before=config.normalize_before,
        decoder_normalize_before=config.normalize_before,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        share_decoder_input_output_embed=config.tie_decoder_embeddings,
        max_source_positions=config.max_positions,
        max_target_positions=config.max_positions,
    )
    task = types.SimpleNamespace(source_dictionary=src_dict, target_dictionary=tgt_dict)
    return TransformerModel.build_model(args, task)


def model_for(train_pairs: Sequence, config: TranslationConfig) -> nn.Module:
    """A fresh model whose source and target dictionaries hold the words of ``train_pairs``."""
    src_dict = build_dictionary([p.src for p in train_pairs])
    tgt_dict = build_dictionary([p.ref for p in train_pairs])
    return build_model(config, src_dict, tgt_dict)


# ---- batches ---------------------------------------------------------------------------------
def encode_pairs(pairs: Sequence, model: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(source ids, target ids) in ``model``'s dictionaries, each ending in </s>; unknown words
    map to <unk>."""

    def ids(d, s):
        return d.encode_line(s, add_if_not_exist=False, append_eos=True).long()

    src_dict, tgt_dict = model.encoder.dictionary, model.decoder.dictionary
    return [(ids(src_dict, p.src), ids(tgt_dict, p.ref)) for p in pairs]


def collate(items: Sequence[tuple[torch.Tensor, torch.Tensor]], pad: int, eos: int) -> dict:
    """A fairseq-style batch: sources left-padded [B, S]; targets and decoder inputs
    (``</s>`` + target[:-1]) right-padded [B, T]."""
    import_fairseq()
    from fairseq.data import data_utils

    src = data_utils.collate_tokens([s for s, _ in items], pad, eos, left_pad=True)
    tgt = data_utils.collate_tokens([t for _, t in items], pad, eos, left_pad=False)
    prev = data_utils.collate_tokens([t for _, t in items], pad, eos, left_pad=False, move_eos_to_beginning=True)
    return {
        "net_input": {
            "src_tokens": src,
            "src_lengths": torch.tensor([len(s) for s, _ in items]),
            "prev_output_tokens": prev,
        },
        "target": tgt,
    }


def token_batches(items: Sequence, max_tokens: int, rng: random.Random | None = None) -> list[list[int]]:
    """Indices grouped by length so that each batch has at most ``max_tokens`` padded tokens;
    batch order shuffled by ``rng`` (kept in length order without one)."""
    order = sorted(range(len(items)), key=lambda i: (max(len(items[i][0]), len(items[i][1])), i))
    groups, current, longest = [], [], 0
    for i in order:
        size = max(len(items[i][0]), len(items[i][1]))
        if current and max(longest, size) * (len(current) + 1) > max_tokens:
            groups.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        groups.append(current)
    if rng is not None:
        rng.shuffle(groups)
    return groups


# ---- loss ------------------------------------------------------------------------------------
def sentence_losses(model: nn.Module, batch: dict, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed (label-smoothed) token cross-entropy of each sentence, [B], in nats."""
    import_fairseq()
    from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

    batch = to_device(batch, model)
    logits = model(**batch["net_input"])[0]
    lprobs = torch.log_softmax(logits.float(), dim=-1)
    target = batch["target"]
    pad = model.decoder.dictionary.pad()
    loss, _ = label_smoothed_nll_loss(
        lprobs.view(-1, lprobs.size(-1)), target.view(-1), label_smoothing, ignore_index=pad, reduce=False
    )
    return loss.view(target.shape).sum(1)


# ---- training --------------------------------------------------------------------------------
def inverse_sqrt(step: int, config: TranslationConfig) -> float:
    """Learning rate at update ``step`` (1-based), fairseq's inverse_sqrt schedule."""
    if step <= config.warmup_updates:
        return config.warmup_init_lr + step * (config.lr - config.warmup_init_lr) / config.warmup_updates
    return config.lr * math.sqrt(config.warmup_updates / step)


def learning_rate(step: int, config: TranslationConfig, total_updates: int) -> float:
    """Learning rate at update ``step`` (1-based) of ``total_updates``: the same linear warm-up,
    then ``config.schedule``: ``inverse_sqrt``, or ``cosine``, half a cosine from ``lr`` to 0 at
    the last update (a run of known length ends annealed, which a short budget rewards)."""
    if config.schedule == "inverse_sqrt" or step <= config.warmup_updates:
        return inverse_sqrt(step, config)
    done = (step - config.warmup_updates) / max(1, total_updates - config.warmup_updates)
    return config.lr * 0.5 * (1 + math.cos(math.pi * min(done, 1.0)))


def optimizer_for(model: nn.Module, config: TranslationConfig) -> torch.optim.Optimizer:
    """Adam with betas (0.9, 0.98) and eps 1e-8 over every parameter, its weight decay as
    ``config.decay`` says. ``decoupled``: fairseq's own Adam (``fairseq.optim.adam.Adam``, what
    ``fairseq-train --optimizer adam --weight-decay`` runs), which shrinks each weight by a factor
    ``1 - lr * weight_decay`` beside the Adam step, as AdamW does. ``coupled``: ``torch.optim.Adam``
    with ``weight_decay``, which adds ``weight_decay * w`` to the gradient before Adam divides by
    its running scale; where a weight's loss gradient is smaller than that term, the step moves
    it toward zero by about the learning rate every update, whatever its size (chapter 02's
    ablation counts the heads it kills)."""
    betas, eps = (0.9, 0.98), 1e-8
    if config.decay == "coupled":
        return torch.optim.Adam(
            model.parameters(), lr=config.lr, betas=betas, eps=eps, weight_decay=config.weight_decay
        )
    import_fairseq()
    from fairseq.optim.adam import Adam

    return Adam(model.parameters(), lr=config.lr, betas=betas, eps=eps, weight_decay=config.weight_decay)


def _epoch_dir(directory: str | os.PathLike, epoch: int) -> Path:
    return Path(directory) / f"checkpoint{epoch}"


def train(
    model: nn.Module,
    train_pairs: Sequence,
    *,
    valid_pairs: Sequence,
    config: TranslationConfig,
    directory: str | os.PathLike,
    progress: bool = True,
    evaluate: Callable[[nn.Module], dict] | None = None,
    log: Callable[[str], None] | None = None,
) -> list[dict]:
    """Train ``model`` on ``train_pairs`` (objects with ``src`` and ``ref``) for ``config.epochs``
    epochs, writing ``checkpoint<epoch>/`` after each and
    resuming from ``last.pt`` if an earlier run was interrupted. Returns one record per epoch:
    ``{"epoch", "train_loss", "valid_loss", "seconds"}`` (losses in nats per target token,
    label-smoothed for train, plain for valid; seconds of training), plus what ``evaluate(model)``
    returns after the epoch (e.g. a BLEU, for a learning curve) and its ``eval_seconds``.
    ``progress`` shows a bar per epoch; each finished epoch's line goes to ``log`` if given (a
    build that trains in several processes logs lines, without bars), else to ``tqdm.write``
    when ``progress``."""
    from ..heads.pruning import save_pruned

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    train_items, valid_items = encode_pairs(train_pairs, model), encode_pairs(valid_pairs, model)
    optimizer = optimizer_for(model, config)
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    history: list[dict] = []
    step, start = 0, 1
    last = directory / "last.pt"
    if last.exists():
        state = torch.load(last, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        rng.setstate(state["python_rng"])
        torch.set_rng_state(state["torch_rng"])
        step, start, history = state["step"], state["epoch"] + 1, state["history"]
    total_updates = config.epochs * len(token_batches(train_items, config.max_tokens))
    for epoch in range(start, config.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        with uniform_dropout():
            total_loss, total_tokens, step = _epoch(
                model,
                optimizer,
                items=train_items,
                config=config,
                rng=rng,
                step=step,
                epoch=epoch,
                progress=progress,
                total_updates=total_updates,
            )
        record = {
            "epoch": epoch,
            "train_loss": total_loss / total_tokens,
            "valid_loss": mean_token_loss(model, valid_items),
            "seconds": time.perf_counter() - t0,
        }
        if evaluate is not None:
            t1 = time.perf_counter()
            record.update(evaluate(model.eval()), eval_seconds=time.perf_counter() - t1)
        history.append(record)
        say = log or (tqdm.write if progress else None)
        if say is not None:
            extra = "".join(
                f", {k} {v:.2f}"
                for k, v in record.items()
                if k not in ("epoch", "train_loss", "valid_loss", "seconds", "eval_seconds")
            )
            say(
                f"epoch {epoch}/{config.epochs}: train loss {record['train_loss']:.3f}, valid loss "
                f"{record['valid_loss']:.3f}{extra} ({record['seconds']:.0f} s)"
            )
        save_pruned(model.eval(), _epoch_dir(directory, epoch))
        with atomic_path(last) as tmp:
            torch.save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "step": step,
                    "epoch": epoch,
                    "history": history,
                    "python_rng": rng.getstate(),
                    "torch_rng": torch.get_rng_state(),
                },
                tmp,
            )
    model.eval()
    return history


def _epoch(
    model: nn.Module,
    optimizer,
    *,
    items: Sequence,
    config: TranslationConfig,
    rng: random.Random,
    step: int,
    epoch: int,
    progress: bool,
    total_updates: int,
) -> tuple[float, int, int]:
    """One pass over ``items`` in batches of ``config.max_tokens``: ``(summed loss, target tokens,
    the last update's number)``."""
    pad, eos = model.decoder.dictionary.pad(), model.decoder.dictionary.eos()
    total_loss, total_tokens = 0.0, 0
    bar = tqdm(
        token_batches(items, config.max_tokens, rng),
        desc=f"epoch {epoch}/{config.epochs}",
        disable=not progress,
        unit="batch",
        leave=False,
    )
    for group in bar:
        batch = collate([items[i] for i in group], pad, eos)
        step += 1
        for g in optimizer.param_groups:
            g["lr"] = learning_rate(step, config, total_updates)
        loss = sentence_losses(model, batch, config.label_smoothing).sum()
        tokens = int(batch["target"].ne(pad).sum())
        (loss / tokens).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        total_loss, total_tokens = total_loss + loss.item(), total_tokens + tokens
        bar.set_postfix(loss=f"{total_loss / total_tokens:.3f}")
    return total_loss, total_tokens, step


@contextlib.contextmanager
def uniform_dropout():
    """Within the block, ``torch.nn.functional.dropout`` (which fairseq's dropout modules and
    ``multi_head_attention_forward`` call) keeps each value where a uniform draw is at least
    ``p``: the same distribution as its ``bernoulli_`` masks, in half the time on the CPU, where
    ``bernoulli_`` took 16% of a training step of the course model (one thread)."""
    import torch.nn.functional as F

    original = F.dropout

    def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        if not training or p == 0.0:
            return input
        kept = input * (torch.rand_like(input) >= p) * (1.0 / (1.0 - p)) if p < 1.0 else torch.zeros_like(input)
        return input.copy_(kept) if inplace else kept

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = original


@torch.no_grad()
def mean_token_loss(model: nn.Module, items: Sequence, max_tokens: int = 4000) -> float:
    """Cross-entropy per target token (nats, no smoothing) of ``items`` in eval mode."""
    model.eval()
    pad, eos = model.decoder.dictionary.pad(), model.decoder.dictionary.eos()
    total, tokens = 0.0, 0
    for group in token_batches(items, max_tokens):
        batch = collate([items[i] for i in group], pad, eos)
        total += sentence_losses(model, batch).sum().item()
        tokens += int(batch["target"].ne(pad).sum())
    return total / tokens


# ---- decoding --------------------------------------------------------------------------------
@torch.no_grad()
def translate(
    model: nn.Module,
    sources: Sequence[str],
    *,
    beam: int = 5,
    lenpen: float = 1.0,
    batch_size: int = 64,
    progress: bool = False,
    max_len_b: int = MAX_LEN_B,
    max_len_a: float = MAX_LEN_A,
) -> list[str]:
    """Beam-search translations of tokenised ``sources``, in order, as token strings; each stops
    at ``max_len_a`` times its batch's longest source (with its ``</s>``) plus ``max_len_b``
    tokens, fairseq's rule; the authors' flat 200 by default. A model caught in a repetition loop
    runs to that limit and holds its whole batch there, so a CPU budget may set a tighter limit;
    kept well above the references' length, it truncates only such loops."""
    (out,) = translate_copies(
        model,
        sources,
        copies=1,
        beam=beam,
        lenpen=lenpen,
        batch_size=batch_size,
        progress=progress,
        max_len_b=max_len_b,
        max_len_a=max_len_a,
    )
    return out


@torch.no_grad()
def translate_copies(
    model: nn.Module,
    sources: Sequence[str],
    *,
    copies: int,
    gated: Callable[[int], contextlib.AbstractContextManager] | None = None,
    beam: int = 5,
    lenpen: float = 1.0,
    batch_size: int = 64,
    progress: bool = False,
    max_len_b: int = MAX_LEN_B,
    max_len_a: float = MAX_LEN_A,
) -> list[list[str]]:
    """``translate`` of ``copies`` copies of ``sources`` in one beam search per batch: the batch
    of b sources is repeated, rows ``[k * b, (k + 1) * b)`` being copy k, and the search runs
    inside ``gated(copies * b)`` (e.g. row gates that give each copy its own heads; see
    ``helpers.sweeps.ablation.gated_passes``). Returns one list of translations per copy. Batches
    and decoding limits are those of ``translate``, so with equal gates every copy equals it."""
    import_fairseq()
    from fairseq.data import data_utils
    from fairseq.sequence_generator import SequenceGenerator

    model.eval()
    src_dict, tgt_dict = model.encoder.dictionary, model.decoder.dictionary
    generator = SequenceGenerator(
        [model], tgt_dict, beam_size=beam, len_penalty=lenpen, max_len_a=max_len_a, max_len_b=max_len_b, min_len=1
    )
    encoded = [src_dict.encode_line(s, add_if_not_exist=False, append_eos=True).long() for s in sources]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: list[list[str]] = [[""] * len(sources) for _ in range(copies)]
    starts = range(0, len(order), batch_size)
    for start in tqdm(starts, desc="translate", disable=not progress, unit="batch", leave=False):
        idx = order[start : start + batch_size]
        src = data_utils.collate_tokens([encoded[i] for i in idx], src_dict.pad(), src_dict.eos(), left_pad=True)
        lengths = torch.tensor([len(encoded[i]) for i in idx])
        sample = to_device(
            {"net_input": {"src_tokens": src.repeat(copies, 1), "src_lengths": lengths.repeat(copies)}}, model
        )
        with gated(copies * len(idx)) if gated else contextlib.nullcontext():
            hypotheses = generator.generate([model], sample)
        for row, hyps in enumerate(hypotheses):
            out[row // len(idx)][idx[row % len(idx)]] = tgt_dict.string(hyps[0]["tokens"])
    return out
