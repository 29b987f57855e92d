"""Is a trained model good enough to study? The competence rule a model's spec states, and the
seeds its build tries.

A spec's ``competence`` section names the split the chapters score the model on and a floor:

* ``reach``: a share of the way from the split's baseline (the best constant prediction, or
  copying the source) to its ceiling (1 for accuracy, F1 and Matthews correlation; for BLEU the
  second human translation's, ``oracle_bleu``);
* ``at_least``: a score in the metric's units;
* both: the higher of the two.

A run must also keep every head alive: a head whose |V_h|·|O_h| is below
``heads.liveness.DEAD_FLOOR`` of its kind's largest, or of a kind far below the model's others
(``dead_heads``, on the record's ``head_norms``), was removed by training before any chapter
masks it, and a study of which heads matter would count it as one that does not. A run whose
score on that split falls below the floor, or that has a dead head, failed to train; the build
trains the same model again with the next seed of ``retry_seeds`` (same data, same recipe) and records the run it
rejected, so chapter 02 lists it: a failed seed is never kept, and never dropped silently.
``tries`` runs in all fail: the build stops and says so (the recipe, not the seed, is at fault).
A spec without ``competence`` (the smoke profile's tiny models, the paper's published archives)
is kept whatever it scores.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..heads.liveness import DEAD_FLOOR, dead_heads

_SEED_STRIDE = 1000  # a retry of seed s trains with s + 1000, then s + 2000: never another run's seed


@dataclass(frozen=True)
class Competence:
    """The rule of one model: ``split`` must score at least ``floor(scores)``."""

    split: str
    reach: float | None = None
    at_least: float | None = None
    tries: int = 3

    def floor(self, split_scores: dict, metric: str) -> float:
        """The floor on ``split_scores`` (one split's record entry: the metric, ``baseline`` and,
        for BLEU, ``oracle_bleu``), in the metric's units."""
        floors = []
        if self.reach is not None:
            baseline = split_scores["baseline"]
            ceiling = split_scores.get("oracle_bleu") if metric == "bleu" else 1.0
            floors.append(baseline + self.reach * (ceiling - baseline))
        if self.at_least is not None:
            floors.append(self.at_least)
        return max(floors)

    def text(self) -> str:
        parts = (
            [f"{self.reach:.0%} of the way from the baseline to the ceiling"] if self.reach is not None else []
        ) + ([f"at least {self.at_least:g}"] if self.at_least is not None else [])
        return f"on {self.split}: " + " and ".join(parts) + f"; every head alive ({_ALIVE})"


_ALIVE = f"|V_h|·|O_h| at least {DEAD_FLOOR:.0%} of its kind's largest"


@dataclass(frozen=True)
class _Judgement:
    """One run against its rule: its ``seed``, ``score`` and ``floor`` on ``split``."""

    seed: int
    split: str
    score: float
    floor: float
    dead: tuple[str, ...] = ()  # its dead heads, "kind layer.head" (0-based)

    @property
    def passed(self) -> bool:
        return self.score >= self.floor and not self.dead

    def as_dict(self) -> dict:
        return {
            "seed": self.seed,
            "split": self.split,
            "score": self.score,
            "floor": self.floor,
            "dead_heads": list(self.dead),
            "passed": self.passed,
        }

    def reason(self) -> str:
        """Why the run failed (empty when it passed)."""
        low = [f"{self.split} {self.score:.3f} < {self.floor:.3f}"] if self.score < self.floor else []
        dead = [f"{len(self.dead)} dead heads ({', '.join(self.dead[:6])}{', ...' if len(self.dead) > 6 else ''})"]
        return "; ".join(low + (dead if self.dead else []))


def rule_of(spec: dict) -> Competence | None:
    """The spec's rule, checked; None where the spec has none."""
    given = spec.get("competence")
    if given is None:
        return None
    unknown = set(given) - {"split", "reach", "at_least", "tries"}
    if unknown or "split" not in given or not ({"reach", "at_least"} & set(given)):
        raise ValueError(
            f"competence {given!r}: give `split` and `reach` (a share of the way from the baseline to "
            f"the ceiling, 0 to 1) and/or `at_least` (a score), optionally `tries`"
            + (f"; unknown keys {sorted(unknown)}" if unknown else "")
        )
    rule = Competence(**given)
    if rule.reach is not None and not 0 <= rule.reach <= 1:
        raise ValueError(f"competence reach {rule.reach} is a share of the way to the ceiling: give 0 to 1")
    if rule.tries < 1:
        raise ValueError(f"competence tries {rule.tries}: give at least 1")
    return rule


def judge(rule: Competence, built: dict, seed: int) -> _Judgement:
    """``built`` (a build's record fields: ``metric``, ``scores`` and ``head_norms``) against ``rule``."""
    if rule.split not in built["scores"]:
        raise ValueError(f"competence split {rule.split!r} is not scored; the model has {sorted(built['scores'])}")
    if "head_norms" not in built:
        raise ValueError(
            "a judged run needs its head_norms (heads.liveness.head_norms of the trained model) to check its heads"
        )
    scores = built["scores"][rule.split]
    dead = tuple(f"{k} {layer}.{head}" for (k, layer, head) in (d.head for d in dead_heads(built["head_norms"])))
    return _Judgement(
        seed, rule.split, float(scores[built["metric"]]), float(rule.floor(scores, built["metric"])), dead
    )


def retry_seeds(seed: int, tries: int) -> list[int]:
    """The seeds a build tries, in order: ``seed``, then ``seed + 1000``, ``seed + 2000``..."""
    return [seed + k * _SEED_STRIDE for k in range(tries)]


class IncompetentModel(RuntimeError):
    """Every seed a build tried fell below the model's competence floor."""
