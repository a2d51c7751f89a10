"""What the comparison reports: its sections, rows, ratios and the issue's targets.

Samples are keyed ``"<section>/<contender>"``; every contender of a section was measured once
per repeat, side by side, so ratios are taken repeat by repeat (``stats.paired_ratio``).
Targets are issue 3's, and issue 13's where it raised them (pairs: 1.5x redis-py `Lock`, 0.95x the
Python socket loop); a contender without a target still shows its ratios.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from turbolock.bench.stats import Summary, paired_ratio, summarize

TL_C = "turbolock c"
TL_PY = "turbolock py"
RP_LOCK = "redis-py Lock"
RP_SCRIPT = "redis-py SET NX + script"
RP_PIPELINE = "redis-py pipeline"
RP_BATCHED = "redis-py release script per 1000 locks"
"""The best hand-written bulk release: turbolock's RELEASE_MANY by hand, eight calls per execute."""
RT_BOUND = "round-trip bound"
PY_LOOP = "Python socket loop"
"""A pair's bytes over a plain blocking socket, no client: the floor for any Python client."""
RB_P1_SET = "redis-benchmark -P 1 SET NX PX"
RB_P1_EVALSHA = "redis-benchmark -P 1 EVALSHA"
RB_SET = "redis-benchmark -P 1000 SET NX PX"
RB_EVALSHA = "redis-benchmark -P 1000 EVALSHA"

PAIRS = "pairs"
ACQUIRE = "acquire"
RELEASE = "release"
ROUND_TRIP = "round-trip"
CPU = "cpu"
MEMORY = "memory"


def key(section: str, contender: str) -> str:
    return f"{section}/{contender}"


@dataclass(frozen=True)
class Comparison:
    baseline: str
    target: float | None = None


@dataclass(frozen=True)
class Row:
    contender: str
    comparisons: tuple[Comparison, ...] = ()
    note: Callable[[Summary], str] | None = None


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    unit: str
    rows: tuple[Row, ...]
    number_format: str = "{:,.0f}"


def _per_round_trip(summary: Summary) -> str:
    return f"{1e6 / summary.median:.1f} us per round trip"


def _per_lock_cpu(summary: Summary) -> str:
    micros = summary.median * 100  # CPU seconds per 10k locks -> microseconds per lock
    return f"{micros:.2f} us a lock, target <= 0.6 (issue #13): {'met' if micros <= 0.6 else 'MISSED'}"


def _lease_bytes(summary: Summary) -> str:
    return f"target <= 150 (issue #13): {'met' if summary.median <= 150 else 'MISSED'}"


_VS_LOCK_AND_RT = (Comparison(RP_LOCK, 1.5), Comparison(PY_LOOP, 0.95), Comparison(RT_BOUND, 0.8))

SECTIONS = (
    Section(PAIRS, "single acquire+release, sequential, one connection", "pairs/s", (
        Row(TL_C, _VS_LOCK_AND_RT),
        Row(TL_PY, _VS_LOCK_AND_RT),
        Row(RP_SCRIPT, (Comparison(RP_LOCK),)),
        Row(RP_LOCK),
        Row(PY_LOOP, (Comparison(RP_LOCK), Comparison(RT_BOUND))),
        Row(RT_BOUND, (Comparison(RP_LOCK),)),
    )),
    Section(ACQUIRE, "bulk acquire of distinct locks, one connection", "locks/s", (
        Row(TL_C, (Comparison(RB_SET, 0.85), Comparison(RP_PIPELINE))),
        Row(TL_PY, (Comparison(RP_PIPELINE, 1.5), Comparison(TL_C, 0.7), Comparison(RB_SET))),
        Row(RP_PIPELINE, (Comparison(RB_SET),)),
        Row(RB_SET),
    )),
    Section(RELEASE, "bulk release of the same locks, one connection", "locks/s", (
        Row(TL_C, (Comparison(RP_PIPELINE, 3.0), Comparison(RP_BATCHED, 1.3), Comparison(RB_EVALSHA))),
        Row(TL_PY, (Comparison(RP_PIPELINE), Comparison(RP_BATCHED), Comparison(RB_EVALSHA))),
        Row(RP_BATCHED, (Comparison(RB_EVALSHA),)),
        Row(RP_PIPELINE, (Comparison(RB_EVALSHA),)),
        Row(RB_EVALSHA),
    )),
    Section(ROUND_TRIP, "server round trip, redis-benchmark -c 1 -P 1", "requests/s", (
        Row(RB_P1_SET, note=_per_round_trip),
        Row(RB_P1_EVALSHA, note=_per_round_trip),
    )),
    Section(CPU, "client CPU per 10k bulk acquisitions (time.process_time)", "CPU s", (
        Row(TL_C, (Comparison(RP_PIPELINE),), note=_per_lock_cpu),
        Row(TL_PY, (Comparison(RP_PIPELINE),)),
        Row(RP_PIPELINE),
    ), "{:.4f}"),
    Section(MEMORY, "memory per held lease (tracemalloc, after acquire_many)", "bytes", (
        Row(TL_C, note=_lease_bytes),
        Row(TL_PY, note=_lease_bytes),
    )),
)


@dataclass(frozen=True)
class RatioResult:
    baseline: str
    ratio: Summary | None
    target: float | None

    @property
    def met(self) -> bool | None:
        if self.target is None or self.ratio is None:
            return None
        return self.ratio.median >= self.target


@dataclass(frozen=True)
class RowResult:
    contender: str
    summary: Summary | None
    ratios: list[RatioResult] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True)
class SectionResult:
    section: Section
    rows: list[RowResult]


def evaluate(samples: Mapping[str, Sequence[float]],
             sections: Sequence[Section] | None = None) -> list[SectionResult]:
    """Each section's rows (``SECTIONS`` unless given): summaries and paired ratios."""
    results = []
    for section in SECTIONS if sections is None else sections:
        rows = []
        for row in section.rows:
            values = samples.get(key(section.name, row.contender), ())
            summary = summarize(values)
            ratios = [RatioResult(c.baseline,
                                  paired_ratio(values, samples.get(key(section.name, c.baseline), ())),
                                  c.target)
                      for c in row.comparisons]
            note = row.note(summary) if row.note is not None and summary is not None else ""
            rows.append(RowResult(row.contender, summary, ratios, note))
        results.append(SectionResult(section, rows))
    return results


def to_json(results: list[SectionResult], samples: Mapping[str, Sequence[float]],
            meta: Mapping[str, Any]) -> dict[str, Any]:
    sections = []
    for result in results:
        rows = []
        for row in result.rows:
            rows.append({
                "contender": row.contender,
                "summary": row.summary.as_dict() if row.summary else None,
                "ratios": [{"baseline": r.baseline, "ratio": r.ratio.as_dict() if r.ratio else None,
                            "target": r.target, "met": r.met} for r in row.ratios],
                "note": row.note,
            })
        sections.append({"name": result.section.name, "title": result.section.title,
                         "unit": result.section.unit, "rows": rows})
    return {"meta": dict(meta), "sections": sections, "samples": {k: list(v) for k, v in samples.items()}}
