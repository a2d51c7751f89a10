"""Medians, spreads and paired ratios over repeated measurements."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Summary:
    median: float
    low: float
    high: float
    q1: float
    q3: float
    count: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(values: Sequence[float]) -> Summary | None:
    if not values:
        return None
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return Summary(statistics.median(values), min(values), max(values), q1, q3, len(values))


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> Summary | None:
    """Ratios taken repeat by repeat (both were measured side by side), then summarised.

    Pairing cancels the machine's drift between repeats better than a ratio of medians.
    """
    if not numerators or len(numerators) != len(denominators):
        return None
    return summarize([n / d for n, d in zip(numerators, denominators, strict=True)])
