"""Tiny randomly initialised models of every supported family, plus inputs and per-example losses.

Each builder returns a ``Case``: the model (eval mode), a batch with padding, a function that
runs the model on a batch and returns its main output tensor, and a per-example loss.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from helpers.zoo.translation_model import fairseq_args

VOCAB = 40
PAD = 0
# the small BERT classifier several tests build (each adds its depth and options)
TINY_BERT = {"vocab_size": 50, "hidden_size": 24, "num_attention_heads": 4, "intermediate_size": 48, "num_labels": 3}


def seeded_config(config_class, base: dict[str, Any], **sizes: Any):
    """``config_class(**base, **sizes)``, torch seeded with 0 first: the model built from it next
    draws the same weights every time."""
    torch.manual_seed(0)
    return config_class(**{**base, **sizes})


@dataclass
class Case:
    name: str
    model: nn.Module
    batch: Any
    run: Callable[[nn.Module, Any], torch.Tensor]  # main output (logits)
    loss: Callable[[nn.Module, Any], torch.Tensor]  # [batch] per-example losses
    kinds: tuple[str, ...]


def _ids(batch: int, length: int, seed: int, pad_tail: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, VOCAB, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    if pad_tail and batch > 1:
        mask[-1, length - 2 :] = 0  # last example is shorter: exercises padding
        ids[-1, length - 2 :] = PAD
    return ids, mask


# ---- transformers encoders ----------------------------------------------------------------
def _encoder_case(name: str, config, n_examples: int = 4, length: int = 7, seed: int = 0) -> Case:
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    ids, mask = _ids(n_examples, length, seed + 1)
    labels = torch.arange(n_examples) % config.num_labels
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}

    def run(m, b):
        return m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits

    def loss(m, b):
        return F.cross_entropy(run(m, b), b["labels"], reduction="none")

    return Case(name, model, batch, run, loss, ("self",))


def _common(**kw):
    base = dict(vocab_size=VOCAB, num_labels=3, initializer_range=0.3, pad_token_id=PAD)
    base.update(kw)
    return base


def bert(layers: int = 2, heads: int = 4, hidden: int = 16) -> Case:
    from transformers import BertConfig

    cfg = BertConfig(
        **_common(
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=32,
            max_position_embeddings=32,
        )
    )
    return _encoder_case("bert", cfg)


def roberta() -> Case:
    from transformers import RobertaConfig

    cfg = RobertaConfig(
        **_common(
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=32,
            max_position_embeddings=40,
            bos_token_id=1,
            eos_token_id=2,
        )
    )
    return _encoder_case("roberta", cfg)


def xlm_roberta() -> Case:
    from transformers import XLMRobertaConfig

    cfg = XLMRobertaConfig(
        **_common(
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=32,
            max_position_embeddings=40,
            bos_token_id=1,
            eos_token_id=2,
        )
    )
    return _encoder_case("xlm-roberta", cfg)


def electra() -> Case:
    from transformers import ElectraConfig

    cfg = ElectraConfig(
        **_common(
            embedding_size=12,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=32,
            max_position_embeddings=32,
        )
    )
    return _encoder_case("electra", cfg)


def distilbert() -> Case:
    from transformers import DistilBertConfig

    cfg = DistilBertConfig(**_common(dim=16, n_layers=2, n_heads=4, hidden_dim=32, max_position_embeddings=32))
    return _encoder_case("distilbert", cfg)


# ---- transformers encoder-decoders ----------------------------------------------------------
def _seq2seq_case(name: str, model: nn.Module, seed: int = 0) -> Case:
    src, src_mask = _ids(3, 6, seed + 1)
    tgt, tgt_mask = _ids(3, 5, seed + 2)
    tgt[:, 0] = model.config.decoder_start_token_id
    batch = {
        "input_ids": src,
        "attention_mask": src_mask,
        "decoder_input_ids": tgt,
        "decoder_attention_mask": tgt_mask,
    }

    def run(m, b):
        return m(**b).logits

    def loss(m, b):
        logits = run(m, b)[:, :-1]
        gold = b["decoder_input_ids"][:, 1:].masked_fill(b["decoder_attention_mask"][:, 1:] == 0, -100)
        tok = F.cross_entropy(logits.transpose(1, 2), gold, reduction="none", ignore_index=-100)
        return tok.sum(1)

    return Case(name, model.eval(), batch, run, loss, ("enc_self", "enc_dec", "dec_self"))


def bart() -> Case:
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    cfg = BartConfig(
        vocab_size=VOCAB,
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=32,
        pad_token_id=PAD,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=None,
        init_std=0.3,
    )
    return _seq2seq_case("bart", BartForConditionalGeneration(cfg))


def marian() -> Case:
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(0)
    cfg = MarianConfig(
        vocab_size=VOCAB,
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=32,
        pad_token_id=PAD,
        eos_token_id=2,
        decoder_start_token_id=PAD,
        init_std=0.3,
    )
    return _seq2seq_case("marian", MarianMTModel(cfg))


# ---- transformers decoder-only LMs ---------------------------------------------------------------
def _causal_lm_case(name: str, config, n_examples: int = 3, length: int = 7, seed: int = 0) -> Case:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).eval()
    ids, mask = _ids(n_examples, length, seed + 1)  # right padding on the last example
    batch = {"input_ids": ids, "attention_mask": mask}

    def run(m, b):
        return m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits

    def loss(m, b):
        logits = run(m, b)[:, :-1]
        gold = b["input_ids"][:, 1:].masked_fill(b["attention_mask"][:, 1:] == 0, -100)
        return F.cross_entropy(logits.transpose(1, 2), gold, reduction="none", ignore_index=-100).sum(1)

    return Case(name, model, batch, run, loss, ("self",))


def gpt2() -> Case:
    from transformers import GPT2Config

    cfg = GPT2Config(
        vocab_size=VOCAB,
        n_embd=16,
        n_layer=2,
        n_head=4,
        n_inner=32,
        n_positions=32,
        initializer_range=0.3,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=PAD,
    )
    return _causal_lm_case("gpt2", cfg)


_LLAMA_LIKE = dict(
    vocab_size=VOCAB,
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=32,
    initializer_range=0.3,
    pad_token_id=PAD,
    bos_token_id=1,
    eos_token_id=2,
)


def llama() -> Case:
    """Grouped-query attention: 4 query heads, 2 key/value heads (query heads 0,1 -> KV 0; 2,3 -> KV 1)."""
    from transformers import LlamaConfig

    return _causal_lm_case("llama", LlamaConfig(**_LLAMA_LIKE))


def qwen2() -> Case:
    """Biases on the query, key and value projections."""
    from transformers import Qwen2Config

    return _causal_lm_case("qwen2", Qwen2Config(**_LLAMA_LIKE))


def qwen3() -> Case:
    """RMSNorm on each head's query and key (q_norm, k_norm over head_dim)."""
    from transformers import Qwen3Config

    return _causal_lm_case("qwen3", Qwen3Config(**_LLAMA_LIKE, head_dim=4))


def mistral() -> Case:
    """A sliding window shorter than the inputs."""
    from transformers import MistralConfig

    return _causal_lm_case("mistral", MistralConfig(**_LLAMA_LIKE, sliding_window=4))


def gemma3() -> Case:
    """Gemma 3's text model: q/k norms, a sliding layer and a global one, its own query scaling."""
    from transformers import Gemma3TextConfig

    cfg = Gemma3TextConfig(
        **_LLAMA_LIKE,
        head_dim=4,
        query_pre_attn_scalar=8,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
    )
    return _causal_lm_case("gemma3", cfg)


DECODER_ONLY_CASES = {
    "gpt2": gpt2,
    "llama": llama,
    "qwen2": qwen2,
    "qwen3": qwen3,
    "mistral": mistral,
    "gemma3": gemma3,
}
GQA_CASES = {k: v for k, v in DECODER_ONLY_CASES.items() if k != "gpt2"}


# ---- fairseq ----------------------------------------------------------------------------------
def fairseq_dictionary(n_words: int = VOCAB):
    from fairseq.data import Dictionary

    d = Dictionary()  # <s>=0, <pad>=1, </s>=2, <unk>=3
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    return d


TINY_FAIRSEQ = dict(
    encoder_embed_dim=16,
    decoder_embed_dim=16,
    encoder_ffn_embed_dim=32,
    decoder_ffn_embed_dim=32,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_layers=2,
    decoder_layers=2,
    dropout=0.1,
    attention_dropout=0.1,
    max_source_positions=64,
    max_target_positions=64,
)


def fairseq_model(arch: str = "transformer_vaswani_wmt_en_de_big", **overrides) -> nn.Module:
    from fairseq.models.transformer import TransformerModel

    torch.manual_seed(0)
    d = fairseq_dictionary()
    args = fairseq_args(arch, **{**TINY_FAIRSEQ, **overrides})
    task = types.SimpleNamespace(source_dictionary=d, target_dictionary=d)
    model = TransformerModel.build_model(args, task)
    with torch.no_grad():  # larger weights than the default init, so heads differ clearly
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(2.0)
    return model.eval()


def fairseq_batch(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (3, 6), generator=g)
    src_lengths = torch.tensor([6, 6, 4])
    src[2, :2] = 1  # left padding, fairseq's default for sources
    tgt = torch.randint(4, VOCAB, (3, 5), generator=g)
    tgt[2, 3:] = 1  # right padding for targets
    prev = torch.cat([torch.full((3, 1), 2), tgt[:, :-1]], 1)
    return {"src_tokens": src, "src_lengths": src_lengths, "prev_output_tokens": prev, "target": tgt}


def fairseq_case(name: str, arch: str, **overrides) -> Case:
    model = fairseq_model(arch, **overrides)

    def run(m, b):
        return m(b["src_tokens"], b["src_lengths"], b["prev_output_tokens"])[0]

    def loss(m, b):
        logits = run(m, b)
        tok = F.cross_entropy(logits.transpose(1, 2), b["target"], reduction="none", ignore_index=1)
        return tok.sum(1)

    return Case(name, model, fairseq_batch(), run, loss, ("enc_self", "enc_dec", "dec_self"))


def fairseq_wmt() -> Case:
    """The paper's WMT architecture family (post-norm, shared embeddings), tiny."""
    return fairseq_case("fairseq-wmt", "transformer_vaswani_wmt_en_de_big", share_all_embeddings=True)


def fairseq_iwslt() -> Case:
    """The paper's IWSLT shape (pre-norm), tiny."""
    return fairseq_case(
        "fairseq-iwslt", "transformer_iwslt_de_en", encoder_normalize_before=True, decoder_normalize_before=True
    )


ALL_CASES = {
    "bert": bert,
    "roberta": roberta,
    "xlm-roberta": xlm_roberta,
    "electra": electra,
    "distilbert": distilbert,
    "bart": bart,
    "marian": marian,
    "fairseq-wmt": fairseq_wmt,
    "fairseq-iwslt": fairseq_iwslt,
    **DECODER_ONLY_CASES,
}
