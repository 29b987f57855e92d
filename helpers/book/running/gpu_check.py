"""The GPU check: what the paper profile's inner passes cost on this device, offline, in minutes.

    python -m helpers.book.running.gpu_check             # make gpu-check: the paper's sizes
    python -m helpers.book.running.gpu_check --reduced   # tiny sizes, any CPU (the tests)

It builds models with random weights at the paper's sizes (``PAPER``): the WMT14 Transformer-big
(6+6 layers, 16 heads, 1,024 wide, post-norm, shared embeddings), ``bert-base-uncased``
(12 x 12 heads) with a 3-label head, and the IWSLT model (6+6 layers, 8 heads, 512 wide,
pre-norm). It feeds them synthetic batches of the paper's lengths. For each chapter's inner pass
it records the time of one pass (the median of ``repeats`` after a warm-up), the peak device
memory and, for decoding, how many configurations per pass ``sweep_decoder.configs_per_pass_for``
chose and the memory it expected. Random weights never end a sentence, so every beam search runs
to the length limit: the worst case, which a trained model reaches only in a repetition loop.

SmolLM2-135M's sizes (a random Llama) run chapters 11-14's inner passes the same way, fed CPU
batches as the chapters feed them: a perplexity sweep, the copying probe, cached generation and a
chapter read through each kind of KV cache. A pass this device cannot run is reported FAILED with
its error, and the check exits 1.

Two checks follow. fairseq's fused attention and the explicit path the sweeps take must agree on
the teacher-forced loss: the gap is printed in float32 epsilons of each sentence's loss, beside
``significance.ROUNDING_EPS``. The out-of-memory fallback (``ablation.gated_passes``) runs once:
on a GPU by asking twice the chosen configurations per pass, on a CPU by a simulated error. Its
translations must equal those of the pass without it.

Every row goes to a CSV (``--out``; default ``results/gpu_check.csv``) and to the screen.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from ...base.devices import default_device
from ...zoo.locations import REPO
from ...zoo.registry import TINY_LLAMAS
from ...zoo.translation_task import Pair

MIB = 1024 * 1024


@dataclass(frozen=True)
class Sizes:
    """The models and batches of one check. ``wmt``, ``iwslt``: fairseq architecture and its
    overrides; ``bert``: ``BertConfig`` arguments; vocabularies are symbol counts."""

    wmt: tuple[str, dict] = ("transformer_vaswani_wmt_en_de_big", {"share_all_embeddings": True})
    wmt_vocab: int = 40_000  # the order of the WMT archive's joined BPE dictionary
    iwslt: tuple[str, dict] = (
        "transformer_iwslt_de_en",
        {"encoder_attention_heads": 8, "decoder_attention_heads": 8,
         "encoder_normalize_before": True, "decoder_normalize_before": True},
    )  # fmt: skip
    iwslt_vocab: int = 10_000  # the order of prepare-iwslt14.sh's BPE dictionaries
    bert: dict = field(default_factory=dict)  # BertConfig's defaults are bert-base's
    source_tokens: int = 128  # a long newstest batch: every source this many subword tokens
    decoding_batch: int = 64  # sentences per search (wmt_ablation.sh: --batch-size 64)
    beam: int = 5
    max_len_b: int = 200  # fairseq's default limit, as the authors decoded (max_len_a 0)
    loss_tokens: int = 2000  # padded tokens per teacher-forced batch (the likelihood sweeps')
    bert_batch: int = 32  # the authors' eval batch size
    bert_length: int = 128  # their max_seq_length
    configs: int = 4  # configurations in each timed single-layer sweep
    repeats: int = 3  # timed passes after the warm-up (decoding: 1)
    # SmolLM2-135M (chapters 11-14): LlamaConfig arguments, and the paper profile's batches
    lm: dict = field(
        default_factory=lambda: dict(
            vocab_size=49_152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
            num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, tie_word_embeddings=True,
        )
    )  # fmt: skip
    lm_batch: int = 64  # verses per batch (chapter 11's batch_size)
    lm_tokens: int = 64  # tokens per verse (at most 40 words)
    lm_configs_per_pass: int = 9  # chapter 11's configs_per_pass
    probe_length: int = 64  # chapter 13b's repeated random tokens, 8 sequences
    prompt_tokens: int = 1024  # chapter 13's prompts and chapter 14's chapters
    new_tokens: int = 64  # chapter 13's generated tokens and chapter 14's repeat
    generation_batch: int = 8  # chapter 13's middle batch size


PAPER = Sizes()
_TINY = {
    "encoder_embed_dim": 32, "decoder_embed_dim": 32, "encoder_ffn_embed_dim": 64, "decoder_ffn_embed_dim": 64,
    "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
}  # fmt: skip
REDUCED = Sizes(
    wmt=("transformer_vaswani_wmt_en_de_big", {"share_all_embeddings": True, **_TINY}),
    wmt_vocab=200,
    iwslt=("transformer_iwslt_de_en", {**_TINY, "encoder_normalize_before": True, "decoder_normalize_before": True}),
    iwslt_vocab=200,
    bert={"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64},
    source_tokens=8,
    decoding_batch=4,
    beam=2,
    max_len_b=6,
    loss_tokens=64,
    bert_batch=4,
    bert_length=16,
    configs=2,
    repeats=1,
    lm={**TINY_LLAMAS["tiny-llama"], "vocab_size": 512, "num_hidden_layers": 2, "tie_word_embeddings": True},
    lm_batch=4,
    lm_tokens=12,
    lm_configs_per_pass=3,
    probe_length=8,
    prompt_tokens=40,
    new_tokens=8,
    generation_batch=2,
)


# ---- models and batches ----------------------------------------------------------------------
def _dictionary(symbols: int):
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(symbols - len(d)):
        d.add_symbol(f"w{i}")
    return d


def translation_model(arch: tuple[str, dict], vocab: int, device: torch.device) -> nn.Module:
    """A fairseq Transformer of ``arch`` (name, overrides) with random weights, in eval mode."""
    from ...base.fairseq_compat import import_fairseq
    from ...zoo.translation_model import fairseq_args

    import_fairseq()
    from fairseq.models.transformer import TransformerModel

    torch.manual_seed(0)
    name, overrides = arch
    d = _dictionary(vocab)
    model = TransformerModel.build_model(
        fairseq_args(name, **overrides), types.SimpleNamespace(source_dictionary=d, target_dictionary=d)
    )
    return model.to(device).eval()


def bert_model(config: dict, device: torch.device) -> nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(num_labels=3, **config)).to(device).eval()


def language_model(config: dict, device: torch.device) -> nn.Module:
    """A Llama with random weights of ``config`` (SmolLM2-135M's sizes at the paper's), eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**config)).to(device).eval()


def sentences(n: int, tokens: int, vocab: int, seed: int = 0) -> list[str]:
    """``n`` sources of ``tokens - 1`` random words of the dictionary (its ``</s>`` makes ``tokens``)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab - 8, (n, tokens - 1), generator=g)
    return [" ".join(f"w{i}" for i in row.tolist()) for row in ids]


# ---- measuring --------------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measured(run: Callable[[], Any], device: torch.device, repeats: int) -> tuple[float, float | None, Any]:
    """``(median seconds of run() over repeats after one warm-up, peak MiB on the device or None
    on a CPU, the last result)``."""
    run()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds, result = [], None
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        result = run()
        _sync(device)
        seconds.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated(device) / MIB if device.type == "cuda" else None
    return statistics.median(seconds), peak, result


def _row(name: str, chapters: str, *, model: str, device: torch.device, seconds: float, peak: float | None,
         per_pass: int | None = None, estimate: float | None = None, note: str = "") -> dict:  # fmt: skip
    return {
        "pass": name,
        "chapters": chapters,
        "model": model,
        "device": str(device),
        "configs_per_pass": per_pass,
        "seconds": seconds,
        "peak_mib": peak,
        "estimate_mib": estimate,
        "note": note,
    }


# ---- the passes --------------------------------------------------------------------------------
def decoding_pass(
    model: nn.Module, name: str, *, chapters: str, sizes: Sizes, device: torch.device
) -> tuple[dict, dict]:
    """One beam search over ``decoding_batch`` sources under as many configurations as the device
    holds (``configs_per_pass_for``): its row, and ``{config: translations}`` for the fallback check."""
    from ...sweeps.ablation import one_head_configs
    from ...zoo.scorers import masked_translations
    from ...zoo.sweep_decoder import configs_per_pass_for, search_bytes

    sources = sentences(sizes.decoding_batch, sizes.source_tokens, len(model.decoder.dictionary))
    decoding = dict(beam=sizes.beam, batch_size=sizes.decoding_batch, max_len_a=0.0, max_len_b=sizes.max_len_b)
    per_pass = configs_per_pass_for(model, sources, **decoding)
    configs = one_head_configs(model)[:per_pass]
    run = lambda: dict(
        masked_translations(model, sources, configs=configs, configs_per_pass=per_pass, progress=False, **decoding)
    )
    seconds, peak, out = measured(run, device, 1)
    one = search_bytes(
        model,
        sizes.source_tokens,
        batch_size=sizes.decoding_batch,
        beam=sizes.beam,
        max_len_a=0.0,
        max_len_b=sizes.max_len_b,
    )
    return _row(
        name,
        chapters,
        model=name.split()[0],
        device=device,
        seconds=seconds,
        peak=peak,
        per_pass=per_pass,
        estimate=per_pass * one / MIB,
    ), out


def likelihood_pass(model: nn.Module, sizes: Sizes, device: torch.device) -> dict:
    """Chapter 03's likelihood sweep on the WMT model: one teacher-forced batch of ``loss_tokens``
    padded tokens, ``configs`` one-head configurations of the first encoder layer (the costliest:
    nothing below it to replay, every layer above computed)."""
    from ...sweeps.ablation import one_head_configs
    from ...zoo.scorers import single_layer_translation_nll

    vocab = len(model.decoder.dictionary)
    n = max(1, sizes.loss_tokens // sizes.source_tokens)
    pairs = [
        Pair(s, r)
        for s, r in zip(sentences(n, sizes.source_tokens, vocab, 1), sentences(n, sizes.source_tokens, vocab, 2))
    ]
    configs = [c for c in one_head_configs(model) if c[0] == "enc_self" and c[1] == 0][: sizes.configs]
    run = lambda: list(
        single_layer_translation_nll(model, pairs, configs=configs, progress=False, max_tokens=sizes.loss_tokens * 2)
    )
    seconds, peak, _ = measured(run, device, sizes.repeats)
    return _sweep_row("wmt likelihood sweep", "wmt", device=device, seconds=seconds, peak=peak, configs=len(configs))


def _sweep_row(name: str, model: str, *, device: torch.device, seconds: float, peak, configs: int) -> dict:
    """The row of a one-head sweep of chapters 03-05: ``seconds`` over ``configs`` configurations,
    one configuration a pass."""
    return _row(
        name,
        "03-05",
        model=model,
        device=device,
        seconds=seconds / configs,
        peak=peak,
        per_pass=1,
        estimate=None,
        note="per configuration",
    )


def classifier_pass(model: nn.Module, sizes: Sizes, device: torch.device) -> dict:
    """Chapter 03's accuracy sweep on BERT: ``configs`` configurations of its first layer on one
    batch of ``bert_batch`` examples of ``bert_length`` tokens, one configuration per pass."""
    from ...sweeps.ablation import one_head_configs, single_layer_sweep

    batch = _bert_batch(model, sizes, device)
    configs = one_head_configs(model)[: sizes.configs]
    run = lambda: single_layer_sweep(model, [batch], run=_logits, configs=configs, progress=False, processes=1)
    seconds, peak, _ = measured(run, device, sizes.repeats)
    return _sweep_row("bert accuracy sweep", "bert", device=device, seconds=seconds, peak=peak, configs=len(configs))


def importance_passes(wmt: nn.Module, bert: nn.Module, sizes: Sizes, device: torch.device) -> list[dict]:
    """Chapter 06's I_h: one forward and backward pass of a batch through each model."""
    import torch.nn.functional as F

    from ...heads.importance import head_importance
    from ...zoo.scorers import translation_loss, translation_loss_batches

    batch = _bert_batch(bert, sizes, device)
    labels = torch.zeros(sizes.bert_batch, dtype=torch.long, device=device)
    bert_loss = lambda m, b: F.cross_entropy(_logits(m, b), labels, reduction="none")
    vocab = len(wmt.decoder.dictionary)
    n = max(1, sizes.loss_tokens // sizes.source_tokens)
    pairs = [
        Pair(s, r)
        for s, r in zip(sentences(n, sizes.source_tokens, vocab, 3), sentences(n, sizes.source_tokens, vocab, 4))
    ]
    wmt_batches = translation_loss_batches(wmt, pairs, sizes.loss_tokens * 2)
    rows = []
    for name, model, batches, loss in (
        ("bert", bert, [batch], bert_loss),
        ("wmt", wmt, wmt_batches, translation_loss),
    ):
        run = lambda model=model, batches=batches, loss=loss: head_importance(
            model, batches, loss_fn=loss, progress=False
        )
        seconds, peak, _ = measured(run, device, sizes.repeats)
        rows.append(
            _row(
                f"{name} importance",
                "06-10",
                model=name,
                device=device,
                seconds=seconds,
                peak=peak,
                per_pass=None,
                estimate=None,
                note="one batch",
            )
        )
    return rows


def _bert_batch(model: nn.Module, sizes: Sizes, device: torch.device) -> dict:
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(1000, model.config.vocab_size, (sizes.bert_batch, sizes.bert_length), generator=g)
    return {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device)}


def _logits(model: nn.Module, batch: dict) -> torch.Tensor:
    return model(**batch).logits


def _token_ids(model: nn.Module, rows: int, tokens: int, seed: int) -> torch.Tensor:
    """``[rows, tokens]`` random token ids, on the CPU (the chapters' batches start there)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, model.config.vocab_size, (rows, tokens), generator=g)


def language_model_passes(model: nn.Module, sizes: Sizes, device: torch.device) -> list[dict]:
    """Chapters 11-14's inner passes on SmolLM2's sizes, each fed CPU batches as the chapters feed
    them: the perplexity of one batch of verses under ``lm_configs_per_pass`` one-head
    configurations (11-13b), the copying probe and induction scores (13b), cached generation
    (13) and a chapter read through each kind of KV cache (14). A pass that fails on this device
    gets its error in ``note`` instead of failing the check (quanto's 2- and 4-bit caches build a
    CUDA extension on their first use on a GPU)."""
    from ...kv.budget import CacheSpec, fast_run, prompt_pass, real_run
    from ...kv.cache import generation_seconds
    from ...probes.induction import copying_stats, induction_scores, repeated_tokens
    from ...sweeps.ablation import one_head_configs
    from ...zoo.causal_lm import PerplexityScorer

    ids = _token_ids(model, sizes.lm_batch, sizes.lm_tokens, 8)
    verses = [{"input_ids": ids, "attention_mask": torch.ones_like(ids)}]
    configs = one_head_configs(model)[: sizes.lm_configs_per_pass]
    scorer = PerplexityScorer(verses, sizes.lm_configs_per_pass)
    probe = repeated_tokens(model.config.vocab_size, sizes.probe_length, batch=8, seed=0, low=1)
    prompts = _token_ids(model, sizes.generation_batch, sizes.prompt_tokens, 9)
    chapter = _token_ids(model, 1, sizes.prompt_tokens + sizes.new_tokens, 10)
    layers, kv = model.config.num_hidden_layers, model.config.num_key_value_heads
    full = tuple((layer == 0,) + (False,) * (kv - 1) for layer in range(layers))  # one group keeps everything
    window = CacheSpec("window", sinks=4, window=124, full=full)
    caches = {
        "plain": CacheSpec("plain"),
        "window": window,
        "fp8": CacheSpec("fp8", bits=8),
        "quanto 4-bit": CacheSpec("quanto", bits=4, residual=128),
        "heavy hitters": CacheSpec("evict", budget=sizes.prompt_tokens // 2, recent=sizes.new_tokens),
    }

    def through(spec: CacheSpec):
        if spec.kind == "evict":
            return real_run(model, chapter, sizes.prompt_tokens, spec)[0]
        return fast_run(model, chapter, prompt_pass(model, chapter, sizes.prompt_tokens), spec)

    passes = [
        ("smollm2 perplexity sweep", "11-13b", lambda: scorer.many(model, configs), len(configs), "per pass"),
        ("smollm2 copying probe", "13b", lambda: (copying_stats(model, probe), induction_scores(model, probe)), None,
         "8 sequences"),
        ("smollm2 cached generation", "13",
         lambda: generation_seconds(model, prompts, new_tokens=sizes.new_tokens, repeats=1, warmup=0), None,
         f"batch {sizes.generation_batch}"),
    ] + [
        (f"smollm2 {name} cache", "14", lambda spec=spec: through(spec), None, "one chapter")
        for name, spec in caches.items()
    ]  # fmt: skip
    rows = []
    for name, chapters, run, per_pass, note in passes:
        try:
            with torch.no_grad():
                seconds, peak, _ = measured(run, device, sizes.repeats)
        except Exception as err:  # reported, not raised: the row says what this device cannot run
            seconds, peak, note = float("nan"), None, f"FAILED: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
        rows.append(
            _row(
                name,
                chapters,
                model="smollm2",
                device=device,
                seconds=seconds,
                peak=peak,
                per_pass=per_pass,
                estimate=None,
                note=note,
            )
        )
    return rows


# ---- the checks --------------------------------------------------------------------------------
def attention_paths_gap(model: nn.Module, sizes: Sizes, device: torch.device) -> dict:
    """The largest gap between fairseq's fused kernel and the explicit path on each sentence's
    teacher-forced loss, in float32 epsilons of that loss."""
    from ...heads.significance import FLOAT32_EPS, ROUNDING_EPS
    from ...heads.sites import explicit_attention
    from ...zoo.scorers import translation_nll

    vocab = len(model.decoder.dictionary)
    pairs = [
        Pair(s, r)
        for s, r in zip(sentences(8, sizes.source_tokens, vocab, 6), sentences(8, sizes.source_tokens, vocab, 7))
    ]
    with torch.no_grad():
        fused = torch.as_tensor(translation_nll(model, pairs)[:, 0])
        with explicit_attention(model):
            explicit = torch.as_tensor(translation_nll(model, pairs)[:, 0])
    gap = float(((explicit - fused).abs() / fused.abs()).max()) / FLOAT32_EPS
    verdict = "within" if gap < ROUNDING_EPS else "BEYOND"
    note = f"{gap:.2f} float32 eps ({verdict} the rounding bound of {ROUNDING_EPS})"
    return _row(
        "fused vs explicit attention",
        "03-10",
        model="wmt",
        device=device,
        seconds=float("nan"),
        peak=None,
        per_pass=None,
        estimate=None,
        note=note,
    )


def fallback_check(model: nn.Module, sizes: Sizes, device: torch.device, first: dict) -> dict:
    """The out-of-memory fallback, once: twice the chosen configurations per pass on a GPU (a
    real error where the estimate was right), a simulated error on a CPU. Its translations of
    the first pass's configurations must equal ``first``'s."""
    import warnings

    from ...sweeps.ablation import gated_passes, one_head_configs
    from ...zoo.sweep_decoder import decode_copies

    per_pass = len(first)
    sources = sentences(sizes.decoding_batch, sizes.source_tokens, len(model.decoder.dictionary))
    decoding = dict(beam=sizes.beam, batch_size=sizes.decoding_batch, max_len_a=0.0, max_len_b=sizes.max_len_b)
    configs = one_head_configs(model)[: 2 * per_pass]

    def run(m, copies, gated):
        if device.type != "cuda" and copies > per_pass:
            raise torch.cuda.OutOfMemoryError("simulated: more configurations than the chosen pass")
        return decode_copies(m, sources, copies=copies, gated=gated, **decoding)

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = dict(gated_passes(model, configs, run=run, configs_per_pass=2 * per_pass, progress=False, processes=1))
    seconds = time.perf_counter() - t0
    halved = any("ran out of device memory" in str(w.message) for w in caught)
    same = all(out[c] == first[c] for c in first)
    note = (
        f"{'halved after an out-of-memory error' if halved else 'no out-of-memory error at this size'}; "
        f"translations {'equal' if same else 'DIFFERENT'} to the pass without it"
    )
    return _row(
        "out-of-memory fallback",
        "03-10",
        model="wmt",
        device=device,
        seconds=seconds,
        peak=None,
        per_pass=2 * per_pass,
        estimate=None,
        note=note,
    )


def run_check(sizes: Sizes, device: torch.device) -> pd.DataFrame:
    """Every pass and check above on ``device``, one row each."""
    wmt = translation_model(sizes.wmt, sizes.wmt_vocab, device)
    bert = bert_model(sizes.bert, device)
    iwslt = translation_model(sizes.iwslt, sizes.iwslt_vocab, device)
    rows = []
    wmt_row, first = decoding_pass(wmt, "wmt BLEU sweep", chapters="03-05", sizes=sizes, device=device)
    rows.append(wmt_row)
    rows.append(likelihood_pass(wmt, sizes, device))
    rows.append(classifier_pass(bert, sizes, device))
    rows += importance_passes(wmt, bert, sizes, device)
    rows.append(decoding_pass(iwslt, "iwslt BLEU curve", chapters="09-10", sizes=sizes, device=device)[0])
    rows.append(attention_paths_gap(wmt, sizes, device))
    rows.append(fallback_check(wmt, sizes, device, first))
    del wmt, bert, iwslt
    rows += language_model_passes(language_model(sizes.lm, device), sizes, device)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reduced", action="store_true", help="tiny models and batches (any CPU, seconds)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "gpu_check.csv")
    args = parser.parse_args(argv)
    device = default_device()
    if device.type != "cuda" and not args.reduced:
        print(
            f"no GPU here ({device}): the paper's sizes would take hours on a CPU. Run with --reduced to check "
            "the code paths; the measurements await a GPU.",
            file=sys.stderr,
        )
        return 2
    t0 = time.perf_counter()
    table = run_check(REDUCED if args.reduced else PAPER, device)
    from ...base.atomic import atomic_path

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out) as tmp:
        table.to_csv(tmp, index=False)
    with pd.option_context("display.width", 200, "display.max_colwidth", 80):
        print(table.to_string(index=False))
    sizes = "reduced" if args.reduced else "paper"
    print(f"{sizes} sizes on {device}: {time.perf_counter() - t0:.0f} s; wrote {args.out}")
    failed = table["note"].astype(str).str.contains("BEYOND|DIFFERENT|FAILED").any()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
