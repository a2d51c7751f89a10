"""Runs the contenders repeat by repeat, side by side, and sums the samples up.

Each repeat runs every contender of a workload once, the order rotating from repeat to repeat so
drift in the machine's load falls on all of them alike. Ratios are taken repeat by repeat
(turbolock's figure over the other contender's, measured minutes apart at most), then summarised.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .stats import Summary, paired_ratio, summarize
from .suite import Contender, Metric


@dataclass
class Row:
    contender: str
    samples: list[float]
    summary: Summary | None
    versus_turbolock: Summary | None
    """turbolock's figure / this contender's, paired per repeat; None on turbolock's own row."""


@dataclass
class MetricResult:
    metric: Metric
    rows: list[Row] = field(default_factory=list)


def rotated(items: Sequence[Contender], repeat: int) -> list[Contender]:
    shift = repeat % len(items) if items else 0
    return [*items[shift:], *items[:shift]]


def measure(contenders: Sequence[Contender], repeats: int,
            on_step: Callable[[str], None] = lambda label: None) -> dict[tuple[str, str], list[float]]:
    """``(contender label, metric id) -> one sample per repeat``."""
    by_workload: dict[str, list[Contender]] = defaultdict(list)
    for contender in contenders:
        by_workload[contender.workload].append(contender)
    samples: dict[tuple[str, str], list[float]] = defaultdict(list)
    for repeat in range(repeats):
        for group in by_workload.values():
            for contender in rotated(group, repeat):
                on_step(f"repeat {repeat + 1}/{repeats}: {contender.workload}, {contender.label}")
                for metric_id, value in contender.step().items():
                    samples[(contender.label, metric_id)].append(value)
    return samples


def summarise(contenders: Sequence[Contender], metrics: dict[str, tuple[Metric, ...]],
              samples: dict[tuple[str, str], list[float]]) -> list[MetricResult]:
    results: list[MetricResult] = []
    for workload, workload_metrics in metrics.items():
        group = [c for c in contenders if c.workload == workload]
        if not group:
            continue
        ours = group[0].label
        for metric in workload_metrics:
            result = MetricResult(metric)
            mine = samples[(ours, metric.id)]
            for contender in group:
                values = samples[(contender.label, metric.id)]
                ratio = None if contender.label == ours else paired_ratio(mine, values)
                result.rows.append(Row(contender.label, values, summarize(values), ratio))
            results.append(result)
    return results


def as_json(results: Sequence[MetricResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "meta": meta,
        "metrics": [
            {"id": r.metric.id, "title": r.metric.title, "unit": r.metric.unit,
             "rows": [{"contender": row.contender, "samples": row.samples,
                       "summary": row.summary.as_dict() if row.summary else None,
                       "turbolock_over_this": (row.versus_turbolock.as_dict()
                                               if row.versus_turbolock else None)}
                      for row in r.rows]}
            for r in results
        ],
    }
