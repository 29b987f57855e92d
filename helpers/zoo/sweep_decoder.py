"""Greedy decoding made for sweeps: many head configurations of a fairseq model in one batch.

fairseq's ``SequenceGenerator`` is a general beam search: at every step it reorders every
layer's cached keys and values (and the encoder's output) to follow the beams, even with one
beam and nothing to reorder, and keeps scores, attention and finalised hypotheses for beams that
greedy decoding never has. A sweep decodes the same sentences under hundreds of head
configurations, so that bookkeeping is paid hundreds of times. ``greedy_copies`` is the same
search with one beam written as a plain loop over the same model and incremental state: at each
step one decoder call on the last token, the same log-probabilities and the same choice
(``torch.topk`` over the running score plus each token's log-probability, as fairseq's
``BeamSearch.step`` does, so that even ties go the same way), the same rules (no padding token,
no end of sentence at the first step, end of sentence forced at the length limit), and rows
dropped only when their sentence has ended. Its output equals ``translate_copies(beam=1)``
token for token (tests/test_sweep_decoder.py, on every configuration kind).

Like ``translate_copies``, it decodes ``copies`` copies of each batch in one search inside
``gated(rows)`` (row gates per configuration, ``helpers.sweeps.ablation.gated_passes``): rows it
drops go through ``model.encoder.reorder_encoder_out``, which the gates follow, and when no
configuration gates an encoder head the encoder runs once per batch (``fairseq_rows``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..base.devices import device_of, to_device
from ..base.fairseq_compat import import_fairseq
from .translation_model import MAX_LEN_A, MAX_LEN_B

DECODER_ENV = "SIXTEEN_HEADS_DECODER"
# Configurations per search on a CPU. There decoding is bound by fairseq's per-step work, not by
# memory: greedy decoding of the course model took 0.57 of the one-at-a-time time with 4 to 24
# per search (2 cores).
CPU_CONFIGS_PER_PASS = 12
MAX_CONFIGS_PER_PASS = 64
MEMORY_SHARE = 0.5  # of the device's free memory, for the searches of one pass


def search_bytes(model: nn.Module, source_tokens: int, *, batch_size: int, beam: int, max_len_a: float,
                 max_len_b: int) -> int:  # fmt: skip
    """An estimate of the device memory one configuration's beam search takes (bytes): for each
    of its ``batch_size * beam`` rows, every decoder layer's cached keys and values over the
    output (at most ``max_len_a * source_tokens + max_len_b`` positions) and over the source
    (``source_tokens``), twice (the search reorders them into new tensors every step), the
    encoder's output, and the step's logits and log-probabilities three times over. The GPU
    check (``helpers.book.running.gpu_check``) measures it against the peak."""
    decoder, encoder = model.decoder, model.encoder
    dim = decoder.embed_tokens.embedding_dim
    layers = len(decoder.layers)
    rows = batch_size * beam
    out_len = min(int(max_len_a * source_tokens + max_len_b), model.max_decoder_positions())
    caches = 2 * layers * 2 * rows * dim * (out_len + source_tokens)
    elements = caches + rows * source_tokens * encoder.embed_tokens.embedding_dim + 3 * rows * len(decoder.dictionary)
    return elements * next(model.parameters()).element_size()


def configs_per_pass_for(model: nn.Module, sources: Sequence[str], *, batch_size: int = 64, beam: int = 5,
                         max_len_a: float = MAX_LEN_A, max_len_b: int = MAX_LEN_B, **_) -> int:  # fmt: skip
    """How many configurations a sweep decodes in one search (``gated_passes``): on a CPU
    ``CPU_CONFIGS_PER_PASS``; on a GPU as many as ``MEMORY_SHARE`` of its free memory holds by
    ``search_bytes`` for the longest of ``sources`` (1 to ``MAX_CONFIGS_PER_PASS``). A pass that
    still runs out of memory is halved (``gated_passes``), so the estimate costs time, never results."""
    device = device_of(model)
    if device.type != "cuda":
        return CPU_CONFIGS_PER_PASS
    longest = max((len(s.split()) + 1 for s in sources), default=1)  # subword tokens and </s>
    free, _ = torch.cuda.mem_get_info(device)
    one = search_bytes(
        model, longest, batch_size=min(batch_size, len(sources)), beam=beam, max_len_a=max_len_a, max_len_b=max_len_b
    )
    return max(1, min(MAX_CONFIGS_PER_PASS, int(free * MEMORY_SHARE // one)))


@torch.no_grad()
def greedy_copies(
    model: nn.Module,
    sources: Sequence[str],
    *,
    copies: int,
    gated: Callable[[int], contextlib.AbstractContextManager] | None = None,
    batch_size: int = 64,
    max_len_b: int = MAX_LEN_B,
    max_len_a: float = MAX_LEN_A,
) -> list[list[str]]:
    """``translation_model.translate_copies`` with ``beam=1``: greedy translations of ``copies``
    copies of tokenised ``sources`` (the same batches, by source length, and the same length
    limit: ``max_len_a`` times the batch's longest source plus ``max_len_b`` tokens), one list
    per copy."""
    import_fairseq()
    from fairseq.data import data_utils

    model.eval()
    src_dict, tgt_dict = model.encoder.dictionary, model.decoder.dictionary
    encoded = [src_dict.encode_line(s, add_if_not_exist=False, append_eos=True).long() for s in sources]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: list[list[str]] = [[""] * len(sources) for _ in range(copies)]
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        src = data_utils.collate_tokens([encoded[i] for i in idx], src_dict.pad(), src_dict.eos(), left_pad=True)
        lengths = torch.tensor([len(encoded[i]) for i in idx])
        net_input = to_device({"src_tokens": src.repeat(copies, 1), "src_lengths": lengths.repeat(copies)}, model)
        with gated(copies * len(idx)) if gated else contextlib.nullcontext():
            hypotheses = _greedy_search(model, net_input, max_len_b, max_len_a)
        for row, tokens in enumerate(hypotheses):
            out[row // len(idx)][idx[row % len(idx)]] = tgt_dict.string(tokens)
    return out


def decode_copies(
    model: nn.Module,
    sources: Sequence[str],
    *,
    copies: int,
    gated: Callable[[int], contextlib.AbstractContextManager] | None = None,
    beam: int = 5,
    lenpen: float = 1.0,
    batch_size: int = 64,
    max_len_b: int = MAX_LEN_B,
    max_len_a: float = MAX_LEN_A,
) -> list[list[str]]:
    """``copies`` copies of ``sources`` decoded with ``beam``: by ``greedy_copies`` for one beam
    (the length penalty then plays no part), else by fairseq's beam search (``translate_copies``).
    ``$SIXTEEN_HEADS_DECODER=generator`` sends one beam to fairseq too (to check that both give
    the same book)."""
    if beam == 1 and os.environ.get(DECODER_ENV) != "generator":
        return greedy_copies(
            model, sources, copies=copies, gated=gated, batch_size=batch_size, max_len_b=max_len_b, max_len_a=max_len_a
        )
    from .translation_model import translate_copies

    return translate_copies(
        model,
        sources,
        copies=copies,
        gated=gated,
        beam=beam,
        lenpen=lenpen,
        batch_size=batch_size,
        max_len_b=max_len_b,
        max_len_a=max_len_a,
    )


def _greedy_search(
    model: nn.Module, net_input: dict, max_len_b: int = MAX_LEN_B, max_len_a: float = MAX_LEN_A
) -> list[torch.Tensor]:
    """The greedy hypothesis of each row of ``net_input`` (``src_tokens`` [B, S], left-padded,
    and ``src_lengths`` [B]): its target tokens, ``</s>`` included, as ``SequenceGenerator``
    with ``beam_size=1, min_len=1`` and these ``max_len_a``, ``max_len_b`` returns them
    (``hypos[0]["tokens"]``)."""
    dictionary = model.decoder.dictionary
    eos, pad = dictionary.eos(), dictionary.pad()
    src_tokens = net_input["src_tokens"]
    rows, src_len = src_tokens.shape[:2]
    max_len = min(int(max_len_a * src_len + max_len_b), model.max_decoder_positions() - 1)
    encoder_out = model.encoder.forward_torchscript(net_input)
    incremental_state: dict = torch.jit.annotate(dict, {})
    tokens = torch.full((rows, max_len + 2), pad, dtype=torch.long, device=src_tokens.device)
    tokens[:, 0] = eos
    scores = torch.zeros(rows, device=src_tokens.device)  # running sum of the chosen log-probabilities
    alive = torch.arange(rows, device=src_tokens.device)  # the original row of each row still decoding
    done: list[torch.Tensor | None] = [None] * rows
    for step in range(max_len + 1):
        logits = model.decoder.forward(
            tokens[:, : step + 1], encoder_out=encoder_out, incremental_state=incremental_state
        )[0]
        lprobs = model.get_normalized_probs((logits[:, -1:, :], None), log_probs=True)[:, -1, :]
        lprobs[lprobs != lprobs] = -torch.inf
        lprobs[:, pad] = -torch.inf
        if step >= max_len:
            lprobs[:, :eos] = -torch.inf
            lprobs[:, eos + 1 :] = -torch.inf
        elif step < 1:  # min_len = 1: no empty translation
            lprobs[:, eos] = -torch.inf
        candidates = lprobs if step == 0 else lprobs + scores.unsqueeze(-1)
        best_scores, best = torch.topk(candidates, k=min(2, candidates.size(1) - 1), dim=1)
        choice, scores = best[:, 0], best_scores[:, 0]
        tokens[:, step + 1] = choice
        ended = choice.eq(eos) & scores.ne(-torch.inf)
        if not bool(ended.any()):
            continue
        for r in ended.nonzero().flatten().tolist():
            done[int(alive[r])] = tokens[r, 1 : step + 2].clone()
        keep = (~ended).nonzero().flatten()
        if keep.numel() == 0:
            break
        alive, tokens, scores = alive[keep], tokens[keep], scores[keep]
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, keep)  # the row gates follow (fairseq_rows)
        model.decoder.reorder_incremental_state_scripting(incremental_state, keep)
    return [t.cpu() for t in done]
