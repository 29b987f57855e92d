"""How each model of a profile is made: its data generated (or read), trained, scored on every split.

``model_cache`` caches what these functions produce under a hash of the model's settings
and of the source of this module and of the modules it calls, so a change here rebuilds.
"""

from __future__ import annotations

import os
import platform
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

from . import appendix_tasks, nli_task, translation_task, verse_task

CLASSIFIER_TASKS = {"nli": "accuracy", "acceptability": "matthews", "sentiment": "accuracy", "paraphrase": "f1"}
TASKS = (*CLASSIFIER_TASKS, "translation")


# label id -> name, as GLUE names them (our generated tasks use the same ids)
_LABEL_NAMES = {
    "nli": nli_task.LABELS,
    "sentiment": ("negative", "positive"),
    "acceptability": ("unacceptable", "acceptable"),
    "paraphrase": ("not_equivalent", "equivalent"),
}


def _label_names(spec: dict) -> tuple[str, ...]:
    """Our label order for a classifier task (index = label id in the data)."""
    return _LABEL_NAMES[spec["task"]]


# ---- data ------------------------------------------------------------------------------------
def generate_data(spec: dict) -> dict[str, list]:
    """The model's splits: generated; made from the verse-aligned Bible when ``spec["corpus"]``
    is ``bible`` (translation and paraphrase, ``verse_task``, with ``corpus_options`` such as
    ``merges`` and ``max_words``); or read from local files when ``spec`` has a ``data``
    section (the paper profile; ``paper_sources.load_splits``)."""
    if "data" in spec:
        from .paper_sources import load_splits

        return load_splits(spec)
    sizes, seed = spec["sizes"], spec.get("data_seed", 0)
    task = spec["task"]
    corpus = spec.get("corpus", "generated")
    if corpus == "bible":
        options = spec.get("corpus_options", {})
        if task == "translation":
            return verse_task.translation_splits(sizes, seed, **options)
        if task == "paraphrase":
            return verse_task.paraphrase_splits(sizes, seed, **options)
        raise ValueError(
            f"the bible corpus has a translation and a paraphrase task, not {task!r}; "
            "drop `corpus: bible` from this model or change its task"
        )
    if corpus != "generated":
        raise ValueError(f"unknown corpus {corpus!r}; use `generated` (the default) or `bible`")
    if task == "nli":
        return nli_task.generate(sizes, seed)
    if task == "translation":
        return translation_task.generate(sizes, seed)
    return appendix_tasks.generate(task, sizes, seed)


COURSE_LANGPAIR = "en-fr"  # every translation task made here (generated or from the Bible) is English -> French


def target_language(spec: dict) -> str:
    """The language a translation model of ``spec`` writes: the target of its data's
    ``langpair`` (the paper profile's models), else French (``COURSE_LANGPAIR``)."""
    return (spec.get("data") or {}).get("langpair", COURSE_LANGPAIR).split("-")[1]


def machine() -> str:
    """A one-line description of this machine, stored with every training time."""
    return (
        f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads)"
    )


def machine_info() -> dict[str, str | int]:
    """What trained the models, for ``models.json``: CPU model, CPU and thread counts, and the
    versions of Python and of the packages that train and run them. Training differs slightly
    between machines, so a result is read with the machine that produced it."""
    from importlib import metadata

    def version(*names: str) -> str:  # the first installed distribution of these names
        for name in names:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return "not installed"

    return {
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count() or 0,
        "torch_threads": torch.get_num_threads(),
        "system": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "torch": version("torch"),
        "transformers": version("transformers"),
        "fairseq": version("fairseq", "fairseq-fixed"),
    }  # fairseq-fixed: 0.12 for Python 3.11


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def build_classifier(spec: dict, data: dict, directory: Path, progress: bool) -> dict:
    """Fine-tune ``spec["encoder"]`` on ``data["train"]`` (or take the fine-tuned
    ``spec["checkpoint"]`` as it is), save it to ``directory/model`` and score it on every other
    split; returns the record's training and score fields."""
    from ..base.devices import default_device
    from ..heads.metrics import METRICS, accuracy
    from ..heads.pruning import save_pruned
    from .classifier_training import FineTuneConfig, align_labels, fine_tune, predict
    from .registry import load_encoder

    labels = 3 if spec["task"] == "nli" else 2
    config = FineTuneConfig(**spec.get("fine_tune", {}))
    checkpoint = spec.get("checkpoint")
    model, tokenizer = load_encoder(checkpoint or spec["encoder"], num_labels=labels, seed=config.seed)
    model.to(default_device())
    if checkpoint:
        align_labels(model, _label_names(spec), spec.get("checkpoint_labels"))
        losses, seconds = [], 0.0
    else:
        t0 = time.perf_counter()
        losses = fine_tune(model, tokenizer, train=data["train"], config=config, progress=progress)
        seconds = time.perf_counter() - t0
    save_pruned(model, directory / "model")
    tokenizer.save_pretrained(directory / "model")
    metric = CLASSIFIER_TASKS[spec["task"]]
    scores = {}
    for split, examples in data.items():
        if split == "train":
            continue
        pred = predict(model, tokenizer, examples=examples, max_length=config.max_length)
        gold = [e.label for e in examples]
        # the baseline: the best constant prediction (majority class for accuracy, always
        # "paraphrase" for F1, 0 for Matthews correlation)
        baseline = max(METRICS[metric]([c] * len(gold), gold) for c in range(labels))
        scores[split] = {metric: METRICS[metric](pred, gold), "accuracy": accuracy(pred, gold), "baseline": baseline}
    return {
        "metric": metric,
        "train_seconds": seconds,
        "train_loss_by_epoch": losses,
        "scores": scores,
        "head_norms": head_norm_lists(model),
    }


def head_norm_lists(model) -> dict[str, list[list[float]]]:
    """``heads.liveness.head_norms`` of ``model`` as nested lists, for a record (competence.py
    reads them to find dead heads, chapter 02 shows them)."""
    from ..heads.liveness import head_norms

    return {kind: grid.tolist() for kind, grid in head_norms(model).items()}


# the learning curve decodes as the course's sweeps do: greedy, up to 24 tokens past the source
_CURVE_MAX_LEN = {"max_len_a": 1.0, "max_len_b": 24}


def _curve_point(valid: list):
    """After each epoch: greedy BLEU on ``valid`` (chapter 02's learning curve; the test splits stay unseen)."""
    from ..heads.metrics import bleu
    from .translation_model import translate

    def evaluate(model) -> dict:
        hyps = translate(model, [p.src for p in valid], beam=1, **_CURVE_MAX_LEN)
        return {"valid_bleu_greedy": bleu(hyps, [p.ref for p in valid])[0]}

    return evaluate


def build_translation(
    spec: dict, data: dict, *, directory: Path, progress: bool, log: Callable[[str], None] | None = None
) -> dict:
    """Train a fairseq Transformer on ``data["train"]`` with a checkpoint per epoch in
    ``directory/checkpoints`` (resuming from ``last.pt`` if there is one), save the final model
    to ``directory/model`` and score it (tokenised BLEU of beam search and of greedy decoding, and
    the beam search's detokenized BLEU against the raw references, ``metrics.BleuDefinition``) on
    every other split; the greedy BLEU on ``valid`` after each epoch is the learning curve.
    ``progress``: bars; ``log``: where each epoch's line goes (``train``)."""
    from ..base.devices import default_device
    from ..heads.metrics import DETOKENIZED, BleuDefinition, bleu
    from ..heads.pruning import save_pruned
    from .translation_model import TranslationConfig, model_for, train, translate

    if spec.get("archive"):  # a published model (the paper's WMT): scored, not trained
        from .registry import load_model

        model, history, seconds = load_model(spec["archive"])[0].to(default_device()), [], 0.0
        save_pruned(model, directory / "model")
    else:
        config = TranslationConfig(**spec.get("train", {}))
        model = model_for(data["train"], config).to(default_device())
        t0 = time.perf_counter()
        history = train(
            model,
            data["train"],
            valid_pairs=data["valid"],
            config=config,
            directory=directory / "checkpoints",
            progress=progress,
            evaluate=_curve_point(data["valid"]),
            log=log,
        )
        seconds = time.perf_counter() - t0
        save_pruned(model, directory / "model")
        (directory / "checkpoints" / "last.pt").unlink()  # optimiser state: only needed to resume
    scores, signature = {}, ""
    detokenized = BleuDefinition(DETOKENIZED, target_language(spec))
    frequent = Counter(p.ref for p in data["train"]).most_common(1)[0][0] if data.get("train") else ""
    for split, pairs in data.items():
        if split == "train":
            continue
        refs = [p.ref for p in pairs]
        hyps = translate(model, [p.src for p in pairs], beam=spec.get("beam", 5))
        score, signature = bleu(hyps, refs)
        score_detokenized, detokenized_signature = detokenized.score(hyps, pairs)
        greedy = bleu(translate(model, [p.src for p in pairs], beam=1), refs)[0]  # as the chapters' sweeps decode
        ceiling = bleu([p.oracle for p in pairs], refs)[0] if pairs[0].oracle else None
        # trivial baselines: the source copied as it is, and the most frequent training reference for every sentence
        copied, constant = bleu([p.src for p in pairs], refs)[0], bleu([frequent] * len(pairs), refs)[0]
        scores[split] = {
            "bleu": score,
            "bleu_detokenized": score_detokenized,
            "bleu_greedy": greedy,
            "oracle_bleu": ceiling,
            "copy_bleu": copied,
            "frequent_bleu": constant,
            "baseline": max(copied, constant),
        }
    return {
        "metric": "bleu",
        "train_seconds": sum(h["seconds"] for h in history),
        "session_seconds": seconds,
        "epochs": history,
        "scores": scores,
        "bleu_signature": signature,
        "bleu_detokenized_signature": detokenized_signature,
        "vocabulary": {"source": len(model.encoder.dictionary), "target": len(model.decoder.dictionary)},
        "head_norms": head_norm_lists(model),
    }
