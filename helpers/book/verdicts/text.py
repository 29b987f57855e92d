"""What the chapters' findings share: reading a table, lists in words, the verdicts paragraph."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

from ..store import measures

MEASURES = tuple((m.suffix, m.name) for m in measures.MEASURES)  # (table suffix, the measure's one name)


def words(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def r_text(value: float) -> str:
    return "undefined" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def rows_by_model(counts: pd.DataFrame) -> Iterable[tuple[str, pd.DataFrame]]:
    for model, part in counts.groupby("model", sort=False):
        yield str(model), part


def percent(value: float) -> str:
    """A share as a whole percentage: ``0.333`` -> ``"33%"``."""
    return f"{value:.0%}"


def share_interval(value: float, low: float, high: float) -> str:
    """A share with its interval: ``interval`` in whole percent, ``0.1, 0.004, 0.31`` ->
    ``"10% [0.4%, 31%]"``."""
    return interval(value, low, high, "{:.0%}")


_FORMAT = re.compile(r"\{:(\+?)\.(\d+)([f%])\}")  # the formats ``interval`` rounds: {:.2f}, {:+.0%}, ...


def interval(value: float, low: float, high: float, fmt: str = "{:.2f}") -> str:
    """``value [low, high]`` in ``fmt``, the bounds rounded outward, so that a bound never prints on
    the far side of a threshold it has not crossed (29.996% prints as 29.9%, 0.3999 as 0.39 in
    ``{:.2f}``). Percent formats print to a tenth of a point (a bound above 0 never prints as 0%):
    ``0.1, 0.004, 0.31`` -> ``"10% [0.4%, 31%]"``. ``fmt``: ``{:.Nf}`` or ``{:.N%}``, with or
    without ``+``."""
    found = _FORMAT.fullmatch(fmt)
    if not found:
        raise ValueError(f"interval format {fmt!r}: use {{:.2f}} or {{:.0%}} (a sign + may lead)")
    sign, digits, kind = found.groups()
    if kind == "%":
        return f"{_tenths(value, round, sign)} [{_tenths(low, math.floor, sign)}, {_tenths(high, math.ceil, sign)}]"
    step = 10.0 ** -int(digits)
    down, up = math.floor(low / step + 1e-9) * step, math.ceil(high / step - 1e-9) * step
    return f"{fmt.format(value)} [{fmt.format(down)}, {fmt.format(up)}]"


def _tenths(value: float, rounding: Callable[[float], float], sign: str = "") -> str:
    tenths = rounding(value * 1000 + (1e-9 if rounding is math.floor else -1e-9 if rounding is math.ceil else 0))
    if tenths == 0 and value != 0:
        return "<0.1%" if value > 0 else ">-0.1%"
    return f"{tenths / 10:{sign}.1f}%".replace(".0%", "%")


def percents(values: Iterable[float]) -> str:
    return words([percent(v) for v in values])


def heads_per_layer_line(models: Sequence[tuple[str, int, str]]) -> str:
    """``models``: (our model, its heads per layer, the paper's model it stands for). The line that
    says how large one head's share of its layer is, here and in the paper."""
    from ..paper.values import HEADS_PER_LAYER

    parts = [
        f"{name} has {n} heads per layer, so one head is 1/{n} of its layer's attention (the paper's {paper}: "
        f"1/{HEADS_PER_LAYER[paper]})"
        for name, n, paper in models
    ]
    return "**The models.** " + ". ".join(parts) + "."


def paper_model(kinds: Iterable[str]) -> str:
    """The paper's model a model of ours stands for: BERT for an encoder (kind ``self``), else WMT."""
    return "BERT" if set(kinds) == {"self"} else "WMT"
