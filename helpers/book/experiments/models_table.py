"""Chapter 02, the models we study: examples of each task, every run's scores against its
baselines, the spread over seeds, the NLI model's accuracy by the edit behind each hypothesis,
and the translation models' learning curves, all read from the model cache's records."""
from __future__ import annotations

import json

import pandas as pd

from ...zoo.classifier_training import predict
from ...zoo.nli_task import LABELS
from ...zoo.recipes import machine_info
from .. import course
from ..profiles import Profile
from ..store.results import results_dir


def examples(settings: Profile, models: list[str], per_split: int) -> pd.DataFrame:
    """The first ``per_split`` examples of every split of every model: model, split, input, target."""
    rows = []
    for name in models:
        for split, items in course.load_data(settings, name).items():
            for ex in items[:per_split]:
                if hasattr(ex, "src"):   # a translation pair (subword units)
                    rows.append((name, split, ex.src, ex.ref))
                elif hasattr(ex, "premise"):
                    rows.append((name, split, f"{ex.premise} / {ex.hypothesis}", LABELS[ex.label]))
                else:
                    rows.append((name, split, ex.text if ex.text_pair is None else f"{ex.text} / {ex.text_pair}", ex.label))
    return pd.DataFrame(rows, columns=["model", "split", "input", "target"])


def run_of(runs: dict[str, list[tuple[int, str]]]) -> dict[str, tuple[str, int]]:
    """``{run name: (model name, training seed)}`` of ``course.seed_runs`` for every model."""
    return {run: (name, seed) for name, rs in runs.items() for seed, run in rs}


def scores(records: dict[str, dict], runs: dict[str, list[tuple[int, str]]]) -> pd.DataFrame:
    """One row per run and split: the metric's score, greedy BLEU, the baseline, the second
    translator's BLEU, the training minutes; and whether the score is well above chance (a third
    of the way from the baseline to the ceiling: 1, or the oracle BLEU) and not saturated."""
    seed_of = run_of(runs)
    table = []
    for run, r in records.items():
        name, seed = seed_of[run]
        for split, s in r["scores"].items():
            table.append({"model": name, "training_seed": seed, "task": r["task"], "split": split, "metric": r["metric"],
                          "score": s[r["metric"]], "greedy": s.get("bleu_greedy"), "baseline": s["baseline"],
                          "oracle": s.get("oracle_bleu"), "train_minutes": r["train_seconds"] / 60})
    return pd.DataFrame(table)


def reach(table: pd.DataFrame) -> pd.DataFrame:
    """``scores`` with ``well_above_chance`` and ``not_saturated``."""
    ceiling = table["oracle"].fillna(1.0)
    share = (table["score"] - table["baseline"]) / (ceiling - table["baseline"])
    return table.assign(well_above_chance=share >= 1 / 3, not_saturated=share <= 0.98)


def spread(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, split and metric: the number of seeds and the mean, lowest and highest score."""
    return (table.groupby(["model", "split", "metric"], sort=False)["score"].agg(["count", "mean", "min", "max"])
            .rename(columns={"count": "seeds"}))


def training_machine(profile: str) -> dict:
    """The machine that trained the models (``models.json``, written by ``make models``), else this one."""
    summary = results_dir(profile) / "models.json"
    recorded = json.loads(summary.read_text()).get("machine") if summary.exists() else None
    return recorded or machine_info()


def machine_lines(records: dict[str, dict], machine: dict) -> str:
    """The BLEU signature, the machine and the summed training time."""
    lines = sorted({f"BLEU signature: {r['bleu_signature']}" for r in records.values() if r["task"] == "translation"})
    lines.append(f"trained on: {machine['cpu_model']}, {machine['cpus']} CPUs, {machine['torch_threads']} torch threads; "
                 f"torch {machine['torch']}, transformers {machine['transformers']}, fairseq {machine['fairseq']}")
    lines.append(f"training time of all {len(records)} runs, summed: {sum(r['train_seconds'] for r in records.values()) / 60:.1f} min")
    return "\n".join(lines)


def baselines(records: dict[str, dict]) -> str:
    """Each translation run's BLEU beside copying the source, the most frequent reference and a
    second translator."""
    lines = []
    for run, r in records.items():
        for split, s in r["scores"].items():
            if "copy_bleu" in s:
                human = "" if s.get("oracle_bleu") is None else f", a second translator {s['oracle_bleu']:.2f}"
                lines.append(f"{run} {split}: BLEU {s['bleu']:.2f}, copying the source {s['copy_bleu']:.2f}, "
                             f"the most frequent training reference {s['frequent_bleu']:.2f}{human}")
    return "\n".join(lines)


def nli_by_edit(settings: Profile, runs: list[tuple[int, str]]) -> pd.DataFrame | None:
    """The NLI model's accuracy (over every seed's predictions) and count by gold label and by the
    edit that made each hypothesis, in both domains; None for data that records no edit (MNLI)."""
    data = course.load_data(settings, "nli")
    if not {e.edit for e in data["matched"]} - {""}:
        return None
    max_length = settings.max_length("nli")
    rows = []
    for seed, run in runs:
        model, tokenizer = course.load_classifier(settings, run)
        for split in ("matched", "mismatched"):
            pred = predict(model, tokenizer, data[split], max_length=max_length).tolist()
            rows += [{"training_seed": seed, "split": split, "edit": e.edit, "gold label": LABELS[e.label],
                      "correct": p == e.label} for e, p in zip(data[split], pred)]
    by_edit = pd.DataFrame(rows).pivot_table(index=["gold label", "edit"], columns="split", values="correct",
                                             aggfunc=["mean", "size"])
    by_edit.columns = [f"{'accuracy' if stat == 'mean' else 'n'} {split}" for stat, split in by_edit.columns]
    return by_edit


def epochs(records: dict[str, dict], runs: dict[str, list[tuple[int, str]]]) -> pd.DataFrame | None:
    """Every trained translation run's per-epoch record, with the training minutes so far; None
    where no translation model was trained here (a published one has no epochs)."""
    seed_of = run_of(runs)
    trained = {run: r for run, r in records.items() if r["task"] == "translation" and r["epochs"]}
    if not trained:
        return None
    table = pd.concat([pd.DataFrame(r["epochs"]).assign(model=seed_of[run][0], training_seed=seed_of[run][1])
                       for run, r in trained.items()], ignore_index=True)
    table["minutes"] = table.groupby(["model", "training_seed"])["seconds"].cumsum() / 60   # training only
    return table


def learning_curves(table: pd.DataFrame, machine: dict, profile: str):
    """Greedy validation BLEU and validation loss against training minutes, per model and seed."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    curve = [c for c in ("valid_bleu_greedy", "valid_loss") if c in table]
    fig, axes = plt.subplots(1, len(curve), figsize=(6 * len(curve), 4), squeeze=False)
    labels = {"valid_bleu_greedy": "greedy BLEU on valid", "valid_loss": "valid loss (nats per token)"}
    for ax, column in zip(axes[0], curve):
        sns.lineplot(data=table, x="minutes", y=column, hue="model", style="training_seed", marker="o", ax=ax)
        ax.set(xlabel=f"training minutes ({machine['cpus']} CPUs)", ylabel=labels[column])
    fig.suptitle(f"translation learning curves, every model and seed ({profile} profile)")
    fig.tight_layout()
    return fig


def last_epochs(table: pd.DataFrame) -> pd.DataFrame:
    """Each run's last epoch: minutes, validation loss and greedy BLEU."""
    last = table.sort_values("epoch").groupby(["model", "training_seed"]).tail(1)
    return last[["model", "training_seed", "epoch", "minutes", "valid_loss"]
                + (["valid_bleu_greedy"] if "valid_bleu_greedy" in last else [])]


def domains(records: dict[str, dict], runs: dict[str, list[tuple[int, str]]]) -> str:
    """Per run of the NLI and the translation model: the in-domain score against the
    out-of-domain one (no verdict: a fact about our models)."""
    in_domain = {"nli": ("matched", "mismatched"), "translation": ("test13", "mtnt")}
    lines = []
    for name, (split, other) in in_domain.items():
        for seed, run in runs.get(name, []):
            s = {k: v[records[run]["metric"]] for k, v in records[run]["scores"].items()}
            lines.append(f"{name} seed {seed}: {split} {s[split]:.3f} vs {other} {s[other]:.3f} -> "
                         f"{'out of domain is lower' if s[other] < s[split] else 'out of domain is NOT lower'}")
    return "\n".join(lines)
