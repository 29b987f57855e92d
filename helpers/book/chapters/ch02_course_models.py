"""Chapter 02, course models: its experiment.

Chapter 02, the models we study: examples of each task, every run's scores against its
baselines, the spread over seeds, whether every head of every model is alive, the weight-decay
ablation that shows why one recipe killed heads, the NLI model's accuracy by the edit behind each
hypothesis, and the translation models' learning curves, read from the model cache's records.
"""

from __future__ import annotations

import json

import pandas as pd

from ...heads.liveness import DEAD_FLOOR
from ...zoo.classifier_training import predict
from ...zoo.nli_task import LABELS
from ...zoo.recipes import machine_info
from .. import course
from ..profiles import Profile
from ..store.results import results_dir

FLOORS_AROUND = (DEAD_FLOOR * 0.3, DEAD_FLOOR * 3)
"""Floors below and above the check's, at which the ablation also counts its dead heads: a count
that moves much between them was read off heads near the floor."""


def examples(settings: Profile, models: list[str], per_split: int) -> pd.DataFrame:
    """The first ``per_split`` examples of every split of every model: model, split, input, target."""
    rows = []
    for name in models:
        for split, items in course.load_data(settings, name).items():
            for ex in items[:per_split]:
                if hasattr(ex, "src"):  # a translation pair (subword units)
                    rows.append((name, split, ex.src, ex.ref))
                elif hasattr(ex, "premise"):
                    rows.append((name, split, f"{ex.premise} / {ex.hypothesis}", LABELS[ex.label]))
                else:
                    rows.append(
                        (name, split, ex.text if ex.text_pair is None else f"{ex.text} / {ex.text_pair}", ex.label)
                    )
    return pd.DataFrame(rows, columns=["model", "split", "input", "target"])


def _run_of(runs: dict[str, list[tuple[int, str]]]) -> dict[str, tuple[str, int]]:
    """``{run name: (model name, training seed)}`` of ``course.seed_runs`` for every model."""
    return {run: (name, seed) for name, rs in runs.items() for seed, run in rs}


def scores(records: dict[str, dict], runs: dict[str, list[tuple[int, str]]]) -> pd.DataFrame:
    """One row per run and split: the metric's score (BLEU: tokenized, beam search), greedy BLEU,
    the beam search's detokenized BLEU against the raw references (the BLEU of chapters 03 to 05),
    the baseline, the second translator's BLEU, the training minutes; and whether the score is
    well above chance (a third of the way from the baseline to the ceiling: 1, or the oracle
    BLEU) and not saturated."""
    seed_of = _run_of(runs)
    table = []
    for run, r in records.items():
        name, seed = seed_of[run]
        for split, s in r["scores"].items():
            table.append(
                {
                    "model": name,
                    "training_seed": seed,
                    "task": r["task"],
                    "split": split,
                    "metric": r["metric"],
                    "score": s[r["metric"]],
                    "greedy": s.get("bleu_greedy"),
                    "detokenized": s.get("bleu_detokenized"),
                    "baseline": s["baseline"],
                    "oracle": s.get("oracle_bleu"),
                    "train_minutes": r["train_seconds"] / 60,
                }
            )
    return pd.DataFrame(table)


def reach(table: pd.DataFrame) -> pd.DataFrame:
    """``scores`` with ``well_above_chance`` and ``not_saturated``."""
    ceiling = table["oracle"].fillna(1.0)
    share = (table["score"] - table["baseline"]) / (ceiling - table["baseline"])
    return table.assign(well_above_chance=share >= 1 / 3, not_saturated=share <= 0.98)


def competence(records: dict[str, dict], runs: dict[str, list[tuple[int, str]]]) -> pd.DataFrame:
    """One row per run: its model's competence rule (``helpers.zoo.competence``), the run's score
    on the rule's split against the floor, whether it passes, the seed it trained with, and the
    runs the build rejected before it (``seed score`` each, and their training minutes)."""
    from ...zoo.competence import judge, rule_of

    seed_of, rows = _run_of(runs), []
    for run, r in records.items():
        name, seed = seed_of[run]
        rule = rule_of(r["spec"])
        judged = judge(rule, r, r.get("trained_seed", seed)) if rule else None
        rejected = r.get("rejected", [])
        rows.append(
            {
                "model": name,
                "training_seed": seed,
                "trained_with_seed": r.get("trained_seed", seed),
                "rule": rule.text() if rule else "none (kept whatever it scores)",
                "score": judged.score if judged else None,
                "floor": judged.floor if judged else None,
                "dead_heads": len(judged.dead) if judged else None,
                "passes": judged.passed if judged else None,
                "rejected_runs": "; ".join(f"seed {x['seed']} {x['score']:.3f}" for x in rejected),
                "rejected_minutes": sum(x["train_seconds"] for x in rejected) / 60,
            }
        )
    return pd.DataFrame(rows)


def competence_line(table: pd.DataFrame) -> str:
    """How many runs pass their rule, and which runs were retrained."""
    ruled = table[table["passes"].notna()]
    retrained = table[table["rejected_runs"] != ""]
    if ruled.empty:
        return f"no run of this profile has a competence rule ({len(table)} runs, each kept whatever it scores)"
    text = f"{int(ruled['passes'].sum())} of {len(ruled)} runs with a rule pass it"
    if len(ruled) < len(table):
        text += f" ({len(table) - len(ruled)} runs have none)"
    if retrained.empty:
        return text + "; no run was rejected"
    return (
        text
        + "; rejected and trained again with a new seed: "
        + "; ".join(
            f"{r.model} seed {r.training_seed} (rejected: {r.rejected_runs}; kept: seed {r.trained_with_seed}, "
            f"{r.score:.3f})"
            for r in retrained.itertuples()
        )
    )


def liveness(records: dict[str, dict], runs: dict[str, list[tuple[int, str]]], language_model) -> pd.DataFrame:
    """One row per training run (and the language model ``(name, model)``, if given) and
    attention kind: its heads, the median |V_h|·|O_h| (``heads.liveness``), the smallest head's
    share of the kind's median and of its largest, and the dead heads (below ``DEAD_FLOOR`` of the
    largest): how many, and which (``layer.head``, 0-based)."""
    from ...heads.liveness import head_norms

    seed_of = _run_of(runs)
    norms = {seed_of[run]: r["head_norms"] for run, r in records.items()}
    if language_model is not None:
        name, model = language_model
        norms[(name, None)] = head_norms(model)
    return pd.DataFrame([row for (name, seed), grids in norms.items() for row in _kind_rows(name, seed, grids)])


def _kind_rows(name: str, seed: int | None, grids: dict) -> list[dict]:
    import torch

    from ...heads.liveness import dead_heads

    dead = dead_heads(grids)
    rows = []
    for kind, grid in grids.items():
        values = torch.as_tensor(grid, dtype=torch.float64)
        values = values[~values.isnan()]
        median, largest, smallest = (float(f(values)) for f in (torch.median, torch.max, torch.min))
        named = [f"{layer}.{head}" for k, layer, head in (d.head for d in dead) if k == kind]
        rows.append(
            {
                "model": name,
                "training_seed": seed,
                "kind": kind,
                "heads": len(values),
                "median": median,
                "smallest_of_median": smallest / median,
                "smallest_of_largest": smallest / largest,
                "dead": len(named),
                "dead_heads": " ".join(named),
            }
        )
    return rows


def liveness_line(table: pd.DataFrame) -> str:
    """Whether every head of every model is alive, and the closest any came to the floor."""

    runs = table.drop_duplicates(["model", "training_seed"])
    closest = table.loc[table["smallest_of_largest"].idxmin()]
    dead = table[table["dead"] > 0]
    named = "; ".join(f"{_run_label(r)} {r.kind} {r.dead_heads}" for r in dead.itertuples())
    return (
        ("Every head is alive. " if dead.empty else f"{int(dead['dead'].sum())} heads are DEAD: {named}. ")
        + f"The check covers {int(table['heads'].sum())} heads of {len(runs)} models and training runs. "
        + f"A head is dead below {DEAD_FLOOR:.0%} of its kind's largest head (all of a kind, where its "
        + f"largest is below {DEAD_FLOOR:.0%} of the model's). The weakest head "
        + f"({_run_label(closest)}, {closest.kind}) has {closest.smallest_of_largest:.1%} of it."
    )


def _run_label(row) -> str:
    """``translation@0``, or a model's name alone where it has no training seed (the language model)."""
    return f"{row.model}" + ("" if pd.isna(row.training_seed) else f"@{int(row.training_seed)}")


def decay_ablation(settings: Profile, epochs: int) -> pd.DataFrame | None:
    """The weight-decay ablation (``zoo.decay_ablation``; its arms built now if ``make models``
    has not): one row per arm and epoch, with the losses, the dead heads per kind and in all.
    None where the profile runs none (``epochs`` 0, or no translation model trained here)."""
    from ...heads.liveness import dead_heads
    from ..course.building import build_arm, decay_arms

    arms = decay_arms(settings, epochs)
    if not arms:
        return None
    rows = []
    for name, arm in arms.items():
        record = build_arm(settings, name, arm, progress="lines")
        for e in record["epochs"]:
            dead = dead_heads(e["head_norms"])
            counts = {f"dead {k}": sum(d.head[0] == k for d in dead) for k in e["head_norms"]}
            heads = sum(len(g) * len(g[0]) for g in e["head_norms"].values())
            rows.append(
                {
                    "arm": name.rsplit("-", 1)[1],
                    "decay": record["spec"]["train"].get("decay", "decoupled"),
                    "weight_decay": record["spec"]["train"].get("weight_decay", 1e-4),
                    "epoch": e["epoch"],
                    "train_loss": e["train_loss"],
                    "valid_loss": e["valid_loss"],
                    **counts,
                    "dead": len(dead),
                    **{_floor_column(f): len(dead_heads(e["head_norms"], floor=f)) for f in FLOORS_AROUND},
                    "heads": heads,
                }
            )
    return pd.DataFrame(rows)


def _floor_column(floor: float) -> str:
    return f"dead below {100 * floor:g}%"


def decay_ablation_line(table: pd.DataFrame | None) -> str:
    """Each arm after its last epoch, a sentence each: dead heads (in all and by kind) and the
    validation loss."""
    if table is None:
        return (
            "The weight-decay ablation does not run on this profile "
            "(decay_ablation_epochs = 0, or no translation model is trained here)."
        )
    last = table[table["epoch"] == table["epoch"].max()]
    floors = [_floor_column(f) for f in FLOORS_AROUND]
    kinds = [c for c in table if c.startswith("dead ") and c not in floors]
    return " ".join(
        f"After {int(r['epoch'])} epochs {_arm_words(r['arm'])}, {int(r['dead'])} of {int(r['heads'])} heads are "
        "dead ("
        + ", ".join(f"{c.removeprefix('dead ')} {int(r[c])}" for c in kinds)
        + f"; {' and '.join(str(int(r[_floor_column(f)])) for f in FLOORS_AROUND)} with a floor of "
        + " or ".join(f"{100 * f:g}%" for f in FLOORS_AROUND)
        + f"), and the validation loss is {r['valid_loss']:.3f}."
        for _, r in last.iterrows()
    )


def _arm_words(arm: str) -> str:
    return "with no weight decay" if arm == "none" else f"with {arm} decay"


def decay_ablation_plot(table: pd.DataFrame, profile: str):
    """Dead heads after each epoch, one line per arm."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6, 3.5))
    sns.lineplot(data=table, x="epoch", y="dead", hue="arm", style="arm", marker="o", ax=ax)
    ax.set(ylabel=f"dead heads (of {int(table['heads'].iloc[0])})", xticks=sorted(table["epoch"].unique()))
    ax.set_title(f"where weight decay enters Adam ({profile} profile)")
    fig.tight_layout()
    return fig


def spread(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, split and metric: the number of seeds and the mean, lowest and highest score."""
    return (
        table.groupby(["model", "split", "metric"], sort=False)["score"]
        .agg(["count", "mean", "min", "max"])
        .rename(columns={"count": "seeds"})
    )


def training_machine(profile: str) -> dict:
    """The machine that trained the models (``models.json``, written by ``make models``), else this one."""
    summary = results_dir(profile) / "models.json"
    recorded = json.loads(summary.read_text()).get("machine") if summary.exists() else None
    return recorded or machine_info()


def machine_lines(records: dict[str, dict], machine: dict) -> str:
    """The BLEU signature, the machine and the summed training time."""
    translations = [r for r in records.values() if r["task"] == "translation"]
    lines = sorted({f"BLEU signature (score, greedy): tokenized: {r['bleu_signature']}" for r in translations})
    lines += sorted(
        {
            f"BLEU signature (detokenized): {r['bleu_detokenized_signature']}"
            for r in translations
            if "bleu_detokenized_signature" in r
        }
    )
    lines.append(
        f"trained on: {machine['cpu_model']}, {machine['cpus']} CPUs, {machine['torch_threads']} torch threads; "
        f"torch {machine['torch']}, transformers {machine['transformers']}, fairseq {machine['fairseq']}"
    )
    rejected = [x for r in records.values() for x in r.get("rejected", [])]
    kept = sum(r["train_seconds"] for r in records.values()) / 60
    lines.append(
        f"training time of all {len(records)} runs, summed: {kept:.1f} min"
        + (
            f", and {sum(x['train_seconds'] for x in rejected) / 60:.1f} min more on the {len(rejected)} "
            "rejected runs they replaced"
            if rejected
            else ""
        )
    )
    return "\n".join(lines)


def baselines(records: dict[str, dict]) -> str:
    """Each translation run's BLEU beside copying the source, the most frequent reference and a
    second translator."""
    lines = []
    for run, r in records.items():
        for split, s in r["scores"].items():
            if "copy_bleu" in s:
                human = "" if s.get("oracle_bleu") is None else f", a second translator {s['oracle_bleu']:.2f}"
                lines.append(
                    f"{run} {split}: BLEU {s['bleu']:.2f}, copying the source {s['copy_bleu']:.2f}, "
                    f"the most frequent training reference {s['frequent_bleu']:.2f}{human}"
                )
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
            pred = predict(model, tokenizer, examples=data[split], max_length=max_length).tolist()
            rows += [
                {
                    "training_seed": seed,
                    "split": split,
                    "edit": e.edit,
                    "gold label": LABELS[e.label],
                    "correct": p == e.label,
                }
                for e, p in zip(data[split], pred)
            ]
    by_edit = pd.DataFrame(rows).pivot_table(
        index=["gold label", "edit"], columns="split", values="correct", aggfunc=["mean", "size"]
    )
    by_edit.columns = [f"{'accuracy' if stat == 'mean' else 'n'} {split}" for stat, split in by_edit.columns]
    return by_edit


def epochs(records: dict[str, dict], runs: dict[str, list[tuple[int, str]]]) -> pd.DataFrame | None:
    """Every trained translation run's per-epoch record, with the training minutes so far; None
    where no translation model was trained here (a published one has no epochs)."""
    seed_of = _run_of(runs)
    trained = {run: r for run, r in records.items() if r["task"] == "translation" and r["epochs"]}
    if not trained:
        return None
    table = pd.concat(
        [
            pd.DataFrame(r["epochs"]).assign(model=seed_of[run][0], training_seed=seed_of[run][1])
            for run, r in trained.items()
        ],
        ignore_index=True,
    )
    table["minutes"] = table.groupby(["model", "training_seed"])["seconds"].cumsum() / 60  # training only
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
    return last[
        ["model", "training_seed", "epoch", "minutes", "valid_loss"]
        + (["valid_bleu_greedy"] if "valid_bleu_greedy" in last else [])
    ]


def domains(records: dict[str, dict], runs: dict[str, list[tuple[int, str]]]) -> str:
    """Per run of the NLI and the translation model: the in-domain score against the
    out-of-domain one (no verdict: a fact about our models)."""
    in_domain = {"nli": ("matched", "mismatched"), "translation": ("test13", "mtnt")}
    lines = []
    for name, (split, other) in in_domain.items():
        for seed, run in runs.get(name, []):
            s = {k: v[records[run]["metric"]] for k, v in records[run]["scores"].items()}
            lines.append(
                f"{name} seed {seed}: {split} {s[split]:.3f} vs {other} {s[other]:.3f} -> "
                f"{'out of domain is lower' if s[other] < s[split] else 'out of domain is NOT lower'}"
            )
    return "\n".join(lines)
