"""Tiny stand-ins, in the published formats, for everything the paper profile reads.

``make_data(root)`` writes into ``root`` (used as ``$SIXTEEN_HEADS_DATA``) what
``profiles/paper.yml`` names, at the paths it names:

* ``bert-base-uncased/``: a 2-layer, 4-head BERT in the hub layout (config.json, safetensors,
  tokenizer files), random weights, MiniLM's uncased WordPiece vocabulary;
* ``glue/{MNLI,SST-2,CoLA,MRPC}/``: GLUE-format TSV files (MNLI with GLUE's full header, CoLA
  without a header) of examples from the course tasks;
* ``wmt14.en-fr.joined-dict.transformer/``: a fairseq archive (``model.pt`` with pickled
  ``args`` as fairseq wrote them, joined ``dict.en.txt``/``dict.fr.txt``, ``bpecodes``) of a
  tiny ``transformer_vaswani_wmt_en_de_big`` with shared embeddings, trained for a few epochs;
* ``sacrebleu/<set>.en-fr.{en,fr}``: plain-text test sets as ``sacrebleu --echo`` writes them;
* ``iwslt14.tokenized.de-en/{train,valid,test}.{de,en}``: a BPE-encoded corpus as
  prepare-iwslt14.sh leaves it.

``standin_profile(root)`` is ``profiles/paper.yml`` with sizes shrunk and nothing else changed:
the same loaders, paths and code run, in seconds.
"""

from __future__ import annotations

import copy
import io
import types
from pathlib import Path

import torch
import yaml

from helpers.book.profiles import PROFILES
from helpers.zoo import appendix_tasks, nli_task, translation_task

SETS = {"wmt09": 10, "wmt10": 10, "wmt11": 10, "wmt12": 10, "wmt13": 24, "wmt14/full": 24, "mtnt1.1/test": 16}
MNLI_TRAIN_HEADER = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
)
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER.replace("label1\tgold_label", "label1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")


def write_tiny_bert(folder: Path) -> None:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from helpers.zoo.shipped import minilm_dir

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir())
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=160,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _mnli_row(i: int, e, dev: bool) -> str:
    label = nli_task.LABELS[e.label]
    labels = "\t".join([label] * (5 if dev else 1))
    return (
        f"{i}\t{1000 + i}\t{1000 + i}e\tfiction\t( x )\t( y )\t(ROOT x)\t(ROOT "
        f"y)\t{e.premise}\t{e.hypothesis}\t{labels}\t{label}"
    )


def write_glue(root: Path) -> None:
    nli = nli_task.generate({"train": 60, "matched": 30, "mismatched": 30}, seed=1)
    mnli = root / "MNLI"
    mnli.mkdir(parents=True)
    for split, name, dev in (
        ("train", "train.tsv", False),
        ("matched", "dev_matched.tsv", True),
        ("mismatched", "dev_mismatched.tsv", True),
    ):
        header = MNLI_DEV_HEADER if dev else MNLI_TRAIN_HEADER
        rows = [_mnli_row(i, e, dev) for i, e in enumerate(nli[split])]
        (mnli / name).write_text("\n".join([header, *rows]) + "\n")
    for task, folder in (("sentiment", "SST-2"), ("acceptability", "CoLA"), ("paraphrase", "MRPC")):
        data = appendix_tasks.generate(task, {"train": 60, "valid": 30}, seed=1)
        (root / folder).mkdir(parents=True)
        for split, name in (("train", "train.tsv"), ("valid", "dev.tsv")):
            if task == "sentiment":
                lines = ["sentence\tlabel"] + [f"{e.text}\t{e.label}" for e in data[split]]
            elif task == "acceptability":
                lines = [f"gj04\t{e.label}\t{'' if e.label else '*'}\t{e.text}" for e in data[split]]
            else:
                lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"] + [
                    f"{e.label}\t{i}\t{i + 1}\t{e.text}\t{e.text_pair}" for i, e in enumerate(data[split])
                ]
            (root / folder / name).write_text("\n".join(lines) + "\n")


def _learn_bpe(texts: list[str], path: Path, merges: int = 200) -> None:
    from subword_nmt.learn_bpe import learn_bpe

    with open(path, "w", encoding="utf-8") as out:
        learn_bpe(io.StringIO("\n".join(texts) + "\n"), out, merges)


def write_wmt(root: Path) -> None:
    """The archive and the sacrebleu test sets (raw text; the profile's Preprocessor tokenises)."""
    from helpers.base.fairseq_compat import import_fairseq
    from helpers.zoo.paper_sources import Preprocessor
    from helpers.zoo.translation_model import TranslationConfig, build_dictionary, fairseq_args, train

    pairs = translation_task.generate({"train": 400, "valid": 20, "test13": 24, "test14": 24, "mtnt": 16}, seed=2)
    archive = root / "wmt14.en-fr.joined-dict.transformer"
    archive.mkdir(parents=True)
    _learn_bpe([p.src for p in pairs["train"]] + [p.ref for p in pairs["train"]], archive / "bpecodes")
    prep = Preprocessor("en-fr", archive / "bpecodes")
    train_pairs = [translation_task.Pair(prep.source(p.src), prep.target(p.ref)) for p in pairs["train"]]
    valid_pairs = [translation_task.Pair(prep.source(p.src), prep.target(p.ref)) for p in pairs["valid"]]
    joined = build_dictionary([p.src for p in train_pairs] + [p.ref for p in train_pairs])
    import_fairseq()
    from fairseq.models.transformer import TransformerModel

    args = fairseq_args(
        "transformer_vaswani_wmt_en_de_big",
        encoder_embed_dim=32,
        decoder_embed_dim=32,
        encoder_ffn_embed_dim=64,
        decoder_ffn_embed_dim=64,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_layers=2,
        decoder_layers=2,
        share_all_embeddings=True,
        dropout=0.1,
        max_source_positions=256,
        max_target_positions=256,
    )
    args.task, args.source_lang, args.target_lang, args.data = "translation", "en", "fr", str(archive)
    torch.manual_seed(0)
    model = TransformerModel.build_model(
        args, types.SimpleNamespace(source_dictionary=joined, target_dictionary=joined)
    )
    train(
        model,
        train_pairs,
        valid_pairs=valid_pairs,
        config=TranslationConfig(epochs=4, lr=3e-3, warmup_updates=20, max_tokens=1500),
        directory=root / "wmt-training",
        progress=False,
    )
    joined.save(str(archive / "dict.en.txt"))
    joined.save(str(archive / "dict.fr.txt"))
    torch.save(
        {
            "args": args,
            "model": model.state_dict(),
            "extra_state": {},
            "last_optimizer_state": None,
            "optimizer_history": [
                {
                    "criterion_name": "LabelSmoothedCrossEntropyCriterion",
                    "optimizer_name": "FairseqAdam",
                    "lr_scheduler_state": {"best": None},
                    "num_updates": 0,
                }
            ],
        },
        archive / "model.pt",
    )
    tests = root / "sacrebleu"
    tests.mkdir()
    sources = {
        "wmt09": pairs["train"][:10],
        "wmt10": pairs["train"][10:20],
        "wmt11": pairs["train"][20:30],
        "wmt12": pairs["train"][30:40],
        "wmt13": pairs["test13"],
        "wmt14/full": pairs["test14"],
        "mtnt1.1/test": pairs["mtnt"],
    }
    for name, part in sources.items():
        stem = tests / f"{name.replace('/', '_')}.en-fr"
        Path(f"{stem}.en").write_text("\n".join(p.src for p in part) + "\n")
        Path(f"{stem}.fr").write_text("\n".join(p.ref for p in part) + "\n")


_LAYER_NORMS_2018 = {
    "encoder": {"self_attn_layer_norm": 0, "final_layer_norm": 1},
    "decoder": {"self_attn_layer_norm": 0, "encoder_attn_layer_norm": 1, "final_layer_norm": 2},
}


def _weights_2018(weights: dict) -> dict:
    """A fairseq Transformer's state dict as fairseq wrote it in 2018: each attention's q, k and v
    projections fused into ``in_proj_weight``/``in_proj_bias`` (q first), layer norms named
    ``layer_norms.<i>``, no ``version`` buffers and no ``output_projection`` (shared embeddings)."""
    old = {}
    for key, tensor in weights.items():
        fused_later = key.endswith(("k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias"))
        if fused_later or key.endswith(".version") or key == "decoder.output_projection.weight":
            continue
        if key.endswith(("q_proj.weight", "q_proj.bias")):
            stem, kind = key.rsplit("q_proj.", 1)
            old[f"{stem}in_proj_{kind}"] = torch.cat([weights[f"{stem}{p}_proj.{kind}"] for p in "qkv"])
            continue
        parts = key.split(".")
        if parts[0] in _LAYER_NORMS_2018 and parts[1] == "layers" and parts[3] in _LAYER_NORMS_2018[parts[0]]:
            parts[3:4] = ["layer_norms", str(_LAYER_NORMS_2018[parts[0]][parts[3]])]
        old[".".join(parts)] = tensor
    return old


def write_2018_archive(archive: Path, folder: Path) -> None:
    """Copy the stand-in ``archive`` (``write_wmt``'s) to ``folder`` in the format of the
    published WMT14 archive, written by fairseq 0.5 in 2018: ``args`` with only that version's
    fields (``relu_dropout``, ``raw_text``, a float ``lr``, ``data`` a list), the weights as
    ``_weights_2018`` names them, and ``extra_state`` without a ``train_iterator``. Loading it
    exercises the upgrade of old checkpoints (fairseq's own) that the published model needs."""
    import argparse
    import shutil

    state = torch.load(archive / "model.pt", map_location="cpu", weights_only=False)
    new = state["args"]
    fields = (
        "arch", "source_lang", "target_lang", "share_all_embeddings", "share_decoder_input_output_embed",
        "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_layers", "encoder_attention_heads",
        "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_layers", "decoder_attention_heads",
        "encoder_normalize_before", "decoder_normalize_before", "encoder_learned_pos", "decoder_learned_pos",
        "dropout", "attention_dropout", "max_source_positions", "max_target_positions",
    )  # fmt: skip
    args = argparse.Namespace(**{f: getattr(new, f) for f in fields})
    args.task, args.data, args.relu_dropout, args.raw_text = "translation", [str(folder)], 0.0, False
    args.lr, args.min_lr, args.optimizer, args.criterion = 0.0005, 1e-09, "adam", "label_smoothed_cross_entropy"
    args.adaptive_softmax_cutoff, args.encoder_embed_path, args.decoder_embed_path = None, None, None
    folder.mkdir(parents=True)
    for f in archive.iterdir():
        if f.name != "model.pt":
            shutil.copy(f, folder / f.name)
    torch.save(
        {
            "args": args,
            "model": _weights_2018(state["model"]),
            "optimizer_history": [
                {
                    "criterion_name": "LabelSmoothedCrossEntropyCriterion",
                    "optimizer_name": "FairseqAdam",
                    "lr_scheduler_state": {"best": 3.9},
                    "num_updates": 100,
                }
            ],
            "last_optimizer_state": None,
            "extra_state": {"epoch": 4, "batch_offset": 0, "val_loss": 3.9},
        },
        folder / "model.pt",
    )


def write_iwslt(root: Path) -> None:
    """French of the course task standing in for German; BPE-encoded like prepare-iwslt14.sh's output."""
    from subword_nmt.apply_bpe import BPE

    # few held-out sentences: an early checkpoint decodes to the maximum length (1.0 * source + 200)
    pairs = translation_task.generate({"train": 240, "valid": 8, "test13": 8, "test14": 1, "mtnt": 1}, seed=3)
    folder = root / "iwslt14.tokenized.de-en"
    folder.mkdir(parents=True)
    _learn_bpe([p.ref for p in pairs["train"]] + [p.src for p in pairs["train"]], folder / "code", merges=150)
    with open(folder / "code", encoding="utf-8") as f:
        bpe = BPE(f)
    for split, ours in (("train", "train"), ("valid", "valid"), ("test", "test13")):
        (folder / f"{split}.de").write_text("\n".join(bpe.process_line(p.ref) for p in pairs[ours]) + "\n")
        (folder / f"{split}.en").write_text("\n".join(bpe.process_line(p.src) for p in pairs[ours]) + "\n")


def make_data(root: Path) -> Path:
    write_tiny_bert(root / "bert-base-uncased")
    write_glue(root / "glue")
    write_wmt(root)
    write_iwslt(root)
    return root


def standin_profile(folder: Path, name: str = "paper-standin") -> str:
    """Write ``<folder>/<name>.yml``: the paper profile with only its sizes shrunk (the IWSLT
    model's width, depth, epochs and batch size; chapter 09's checkpoints skip epoch 1, after
    which this model still decodes every sentence to the maximum length, slowly), and chapter 07's
    ``torch.compile`` backend (dynamo's tracing without code generation). Returns ``name``."""
    profile = yaml.safe_load((PROFILES / "paper.yml").read_text())
    shrunk = copy.deepcopy(profile)
    shrunk["description"] = "the paper profile on tiny stand-ins (tests/paper_standins.py)"
    shrunk["models"]["iwslt"]["train"].update(
        layers=2, embed_dim=32, ffn_dim=64, epochs=3, max_tokens=300, warmup_updates=20, lr=3.0e-3, max_positions=256
    )
    shrunk["notebooks"]["09_training_dynamics"].update(epochs=[2, 3], right_panel_epochs=[2, 3])
    # the stand-in sets (16 to 60 examples) are below the bootstrap's minimum of 30: code paths only
    shrunk["defaults"]["min_units"] = 2
    # chapter 11 runs the real SmolLM2-135M: its 270-head grid cost 8 of the suite's 32 minutes on 12 verses
    shrunk["notebooks"]["11_nine_heads"].update(
        select_verses=4,
        report_verses=4,
        batch_size=4,
        random_orders=1,
        timed_verses=4,
        speed_batch_sizes=[1, 4],
        repeats=1,
        n_resamples=100,
    )
    # chapter 12 runs SmolLM2-135M three times and trains gates per penalty: the sizes of the smoke profile
    shrunk["notebooks"]["12_unimportant_or_unmeasured"].update(
        lm_verses=0,
        lm_reference_verses=2,
        reference_examples=4,
        gate_steps=5,
        gate_examples=32,
        n_resamples=100,
        lm_removals=False,
    )
    # chapter 13 generates with SmolLM2-135M ten times, 13b scores 30 curve steps three ways: short prompts, few steps
    shrunk["notebooks"]["13_what_removing_heads_buys"].update(
        select_verses=4,
        report_verses=4,
        prompt_verses=20,
        prompt_tokens=32,
        new_tokens=4,
        speed_batch_sizes=[1, 2],
        repeats=1,
    )
    shrunk["notebooks"]["13b_what_removing_heads_breaks"].update(
        select_verses=4,
        report_verses=4,
        probe_length=8,
        probe_sequences=8,
        random_orders=1,
        band_orders=3,
        step=0.25,
        configs_per_pass=1,
    )
    # chapter 14 reads whole chapters with SmolLM2-135M through every cache: a few short ones, few orders
    shrunk["notebooks"]["14_memory_budget"].update(
        select_verses=4,
        report_verses=4,
        sequences=4,
        calibration_sequences=2,
        chapter_tokens=64,
        repeat_tokens=8,
        passage_start=4,
        window=6,
        residual_length=8,
        band_orders=2,
        evict_budgets=[0.5],
        combo_budgets=[0.5],
        check_sequences=1,
        n_resamples=100,
        batch_size=4,
    )
    # chapter 14b exports SmolLM2 in 16 files' worth of settings and reads every text through each: few short texts
    shrunk["notebooks"]["14b_served_at_equal_memory"].update(
        select_verses=4,
        report_verses=4,
        texts=4,
        text_tokens=64,
        cells=[256],
        speed_threads=[1],
        prompt_tokens=16,
        new_tokens=2,
        repeats=1,
        n_resamples=100,
        batch_size=4,
    )
    # torch.compile traces the models as on a GPU, without the minutes of C++ code generation per shape
    shrunk["notebooks"]["07_pruning_speed"].update(compile_backend="eager")
    (folder / f"{name}.yml").write_text(yaml.safe_dump(shrunk, sort_keys=False))
    return name
