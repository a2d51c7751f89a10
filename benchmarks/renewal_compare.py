"""Renewal: turbolock's renewer against redis-py's ways of renewing held locks, on one server.

    python -m benchmarks.renewal_compare [--quick] [--json PATH] [--profile]

One throwaway redis-server, one run, three measurements (issue 4's targets):

1. Throughput: every held lock renewed once, in renewals/s. redis-py: ``Lock.extend()`` one by
   one (on a subset: it is slow), pipelined EVALSHA of an extend script, and one EVALSHA of
   turbolock's RENEW_MANY per 1000 keys (plus, for reference, several of those per pipelined
   write). turbolock: the real renewal path, per core. The locks are taken with auto_renew and
   a renew_before that makes all of them due together a moment later; the client's own
   renewer thread then renews them in one round, timed from the wheel ``advance`` that found
   them due to the end of ``_renew`` (``renewal_contenders.RoundProbe``). Every contender
   renews the same key names with the same ttl, the server flushed and the locks taken again
   (untimed) before each measurement; the order rotates from repeat to repeat.
2. Steady state: 100k auto-renewed locks per core, both cores at once (their rounds half an
   interval apart), for whole renewal intervals. CPU is the renewer thread's own clock
   (``pthread_getcpuclockid``), sampled half-way between rounds, so each sample window holds
   one round. A shorter ttl (``--quick``) is normalised to a 30 s ttl: rounds are rarer in
   proportion, ticking between rounds costs the same per second. Process CPU minus an idle
   baseline is reported as a cross-check.
3. Memory per auto-renewed lock beyond the lease: tracemalloc around ``acquire_many`` with and
   without auto_renew, the difference per lock.

Progress goes to stderr, the table to stdout, samples and summaries to JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import heapq
import json
import os
import platform
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import redis

import turbolock
from turbolock import LockClient
from turbolock._wire import core as _core
from turbolock._wire import scripts as _scripts
from turbolock.bench.contenders import BenchmarkError, Timing, core_available
from turbolock.bench.renewal import RedisPyPipelinedRenewMany, hold
from turbolock.bench.stats import Summary, paired_ratio, summarize
from turbolock.bench.workload import KEY_PREFIX, names
from turbolock.redis_server import RedisServer

from .renewal_contenders import (
    RedisPyExtend,
    RedisPyPipelinedExtend,
    RedisPyRenewMany,
    SteadyRenewer,
    TurbolockExtendMany,
    TurbolockRenewer,
    core_renews,
    retained_per_lease,
)
from .report import TL_C, TL_PY, key

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "renewal.json")
CORES = {TL_C: "c", TL_PY: "py"}
EXTEND_MANY = {TL_C: "turbolock c extend_many", TL_PY: "turbolock py extend_many"}
"""Per core: ``extend_many`` of the same held locks (the renewer's rows are its rounds)."""

RP_EXTEND = "redis-py Lock.extend() one by one"
RP_PIPE = "redis-py pipelined EVALSHA extend"
RP_MANY = "redis-py EVALSHA renew_many per 1000 keys"
RP_MANY_PIPE = "redis-py renew_many, 8 per pipelined write"
RP_BEST = "best redis-py anchor approach"
ANCHORS = {RP_EXTEND: 8.3e3, RP_PIPE: 58e3, RP_MANY: 184e3}
"""Issue 4's anchors (renewals/s), measured with redis-py on this kind of machine."""

THROUGHPUT = "throughput"
CPU = "cpu"
SERVER = "server"
STEADY = "steady"
STEADY_ROUNDS = "steady-rounds"
STEADY_TICKS = "steady-ticks"
STEADY_MEASURED = "steady-measured"
MEMORY = "memory"
MEMORY_LEASE = "memory-lease"

REFERENCE_TTL = 30.0
REFERENCE_INTERVAL = REFERENCE_TTL * 2 / 3
"""Seconds between renewals of a 30 s lock with the default renew_before (a third of the ttl)."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RenewalWorkload:
    locks: int
    """Held locks renewed once per throughput measurement."""
    extend_locks: int
    """The subset ``Lock.extend()`` renews one by one."""
    repeats: int
    steady_locks: int
    steady_ttl: float
    steady_renew_before: float
    steady_cycles: int
    """Renewal intervals measured per core, one sample each."""
    memory_locks: int
    """Leases traced. 50k sit at the same dict load factor as 100k: the same bytes per lock."""
    baseline_seconds: float

    @property
    def steady_interval(self) -> float:
        return self.steady_ttl - self.steady_renew_before


DEFAULT = RenewalWorkload(locks=100_000, extend_locks=5000, repeats=5, steady_locks=100_000,
                          steady_ttl=30.0, steady_renew_before=10.0, steady_cycles=3, memory_locks=100_000,
                          baseline_seconds=2.0)
QUICK = RenewalWorkload(locks=20_000, extend_locks=2000, repeats=3, steady_locks=100_000,
                        steady_ttl=9.0, steady_renew_before=3.0, steady_cycles=2, memory_locks=50_000,
                        baseline_seconds=1.0)


# -- what is reported -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    contender: str
    label: str = ""
    baselines: tuple[str, ...] = ()
    ratio_target: float | None = None
    """The first baseline's paired ratio must be at least this."""
    limit: float | None = None
    """The median must be at most this (below it, with ``strict``)."""
    strict: bool = False
    note: str = ""

    @property
    def shown(self) -> str:
        return self.label or self.contender


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    unit: str
    rows: tuple[Row, ...]
    number_format: str = "{:,.0f}"


def _anchor(label: str) -> str:
    return f"anchor {ANCHORS[label] / 1000:g}k/s"


def sections(workload: RenewalWorkload) -> tuple[Section, ...]:
    setting = (f"ttl {workload.steady_ttl:g} s, renewed every {workload.steady_interval:g} s")
    if workload.steady_ttl != REFERENCE_TTL or workload.steady_interval != REFERENCE_INTERVAL:
        setting += f", normalised to ttl {REFERENCE_TTL:g} s"
    steady_rows: list[Row] = []
    memory_rows: list[Row] = []
    for label in CORES:
        steady_rows += [
            Row(label, limit=5.0, note="renewer thread CPU"),
            Row(f"{label}/rounds", f"  {label}: renewal rounds"),
            Row(f"{label}/ticks", f"  {label}: wheel ticks between rounds"),
        ]
        memory_rows += [
            Row(label, f"{label}: renewal, beyond the lease", limit=300.0, strict=True),
            Row(f"{label}/lease", f"  {label}: the lease alone"),
        ]
    best_vs = (RP_BEST, RP_MANY_PIPE)
    extend_many = [EXTEND_MANY[label] for label in CORES]
    return (
        Section(THROUGHPUT, f"renewal throughput, {workload.locks:,} held locks renewed once", "renewals/s", (
            Row(TL_C, f"{TL_C}: one renewer round", baselines=best_vs, ratio_target=1.3),
            Row(TL_PY, f"{TL_PY}: one renewer round", baselines=best_vs, ratio_target=1.3),
            *(Row(label, baselines=best_vs, ratio_target=1.3) for label in extend_many),
            Row(RP_BEST, baselines=(RP_EXTEND,)),
            Row(RP_MANY, baselines=(RP_EXTEND,), note=_anchor(RP_MANY)),
            Row(RP_PIPE, baselines=(RP_EXTEND,), note=_anchor(RP_PIPE)),
            Row(RP_EXTEND, f"{RP_EXTEND} ({workload.extend_locks:,})", note=_anchor(RP_EXTEND)),
            Row(RP_MANY_PIPE, baselines=(RP_MANY,)),
        )),
        Section(CPU, "client CPU per 10k renewals, lower is better (turbolock: its renewer thread)", "ms", (
            Row(TL_C, baselines=(RP_MANY,)),
            Row(TL_PY, baselines=(RP_MANY,)),
            *(Row(label, baselines=(RP_MANY,)) for label in extend_many),
            Row(RP_MANY),
            Row(RP_PIPE),
            Row(RP_EXTEND),
            Row(RP_MANY_PIPE),
        ), "{:.1f}"),
        Section(SERVER, "server time per renewal (INFO commandstats, EVALSHA usec)", "us", (
            Row(TL_C),
            Row(TL_PY),
            *(Row(label) for label in extend_many),
            Row(RP_MANY),
            Row(RP_PIPE),
            Row(RP_EXTEND),
            Row(RP_MANY_PIPE),
        ), "{:.2f}"),
        Section(STEADY, f"steady state, {workload.steady_locks:,} auto-renewed locks ({setting})",
                "% of one core", tuple(steady_rows), "{:.2f}"),
        Section(MEMORY, f"client memory per auto-renewed lock (tracemalloc, {workload.memory_locks:,} locks)",
                "bytes", tuple(memory_rows)),
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
    row: Row
    summary: Summary | None
    ratios: list[RatioResult] = field(default_factory=list)

    @property
    def met(self) -> bool | None:
        if self.row.limit is None or self.summary is None:
            return None
        median, limit = self.summary.median, self.row.limit
        return median < limit if self.row.strict else median <= limit


def evaluate(section: Section, samples: Mapping[str, Sequence[float]]) -> list[RowResult]:
    results = []
    for row in section.rows:
        values = samples.get(key(section.name, row.contender), ())
        ratios = [RatioResult(baseline, paired_ratio(values, samples.get(key(section.name, baseline), ())),
                              row.ratio_target if i == 0 else None)
                  for i, baseline in enumerate(row.baselines)]
        results.append(RowResult(row, summarize(values), ratios))
    return results


_HEADER = ("contender", "median", "spread (min-max)", "ratio", "vs", "target", "met?")
_WIDTHS = (46, 9, 19, 6, 42, 7, 4)


def _line(cells: Sequence[str]) -> str:
    left, *rest = cells
    parts = [left.ljust(_WIDTHS[0])]
    for cell, width, text in zip(rest, _WIDTHS[1:], (False, False, False, True, False, False), strict=True):
        parts.append(cell.ljust(width) if text else cell.rjust(width))
    return "  ".join(parts).rstrip()


def _met(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: "n/a"}[met]


def _row_lines(result: RowResult, number_format: str) -> list[str]:
    row, s = result.row, result.summary
    median = "n/a" if s is None else number_format.format(s.median)
    spread = "" if s is None else f"{number_format.format(s.low)}-{number_format.format(s.high)}"
    cells: list[tuple[str, str, str, str]] = []
    for ratio in result.ratios:
        value = f"{ratio.ratio.median:.2f}x" if ratio.ratio else "n/a"
        target = f">={ratio.target:g}x" if ratio.target is not None else ""
        cells.append((value, ratio.baseline, target, _met(ratio.met) if ratio.target is not None else ""))
    if row.limit is not None:
        limit = f"{'<' if row.strict else '<='}{row.limit:g}"
        cells.insert(0, ("", row.note, limit, _met(result.met)))
    elif row.note:
        cells.append(("", row.note, "", ""))
    if not cells:
        cells.append(("", "", "", ""))
    lines = [_line((row.shown, median, spread, *cells[0]))]
    lines += [_line(("", "", "", *extra)) for extra in cells[1:]]
    return lines


def render(results: Sequence[tuple[Section, list[RowResult]]]) -> str:
    out = [_line(_HEADER), "-" * (sum(_WIDTHS) + 2 * (len(_WIDTHS) - 1))]
    for section, rows in results:
        out.append(f"{section.title} [{section.unit}]")
        for result in rows:
            out.extend("  " + line for line in _row_lines(result, section.number_format))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def to_json(results: Sequence[tuple[Section, list[RowResult]]]) -> list[dict[str, Any]]:
    out = []
    for section, rows in results:
        out.append({
            "name": section.name, "title": section.title, "unit": section.unit,
            "rows": [{
                "contender": r.row.shown,
                "summary": r.summary.as_dict() if r.summary else None,
                "limit": r.row.limit, "strict": r.row.strict, "met": r.met,
                "ratios": [{"baseline": x.baseline, "ratio": x.ratio.as_dict() if x.ratio else None,
                            "target": x.target, "met": x.met} for x in r.ratios],
                "note": r.row.note,
            } for r in rows],
        })
    return out


# -- the run --------------------------------------------------------------------------------------

Step = tuple[str, Callable[[], dict[str, float]]]


def round_lead(count: int) -> float:
    """How long after the acquire is sent the throughput round's locks come due: past the end of
    ``acquire_many`` plus the renewer's bookkeeping (about 15 us per lock on this machine)."""
    return max(0.3, count * 15e-6)


class Run:
    def __init__(self, server: RedisServer, workload: RenewalWorkload) -> None:
        self.server = server
        self.workload = workload
        self.admin = redis.Redis.from_url(server.url)
        for script in _scripts.ALL:
            self.admin.script_load(script.source)
        self.setup = LockClient.from_url(server.url, key_prefix=KEY_PREFIX)
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.best: Counter[str] = Counter()
        self.steady: dict[str, Any] = {}
        self.closers: list[Callable[[], None]] = []

    def _evalsha_usec(self) -> float:
        stats = self.admin.info("commandstats").get("cmdstat_evalsha")
        return float(stats["usec"]) if stats else 0.0

    def _record(self, label: str, rate: float, cpu_per_op: float, server_us: float) -> dict[str, float]:
        return {key(THROUGHPUT, label): rate, key(CPU, label): cpu_per_op * 10_000 * 1000,
                key(SERVER, label): server_us}

    def throughput_steps(self, lock_names: list[str]) -> list[Step]:
        steps: list[Step] = []
        for label, core in CORES.items():
            if not core_renews(core):
                why = "is not built" if _core.core_c is None else "has no TimerWheel yet"
                progress(f"{label}: n/a (turbolock._core_c {why}: it cannot auto-renew)")
                continue
            contender = TurbolockRenewer(self.server.url, core)
            self.closers.append(contender.close)
            lead = round_lead(len(lock_names))
            self.admin.flushall()
            contender.renew_round(names("warm", 2000), lead=round_lead(2000))

            def round_of(_: None, contender: TurbolockRenewer = contender, lead: float = lead) -> Timing:
                return contender.renew_round(lock_names, lead=lead)[0]

            steps.append(self._step(label, lambda: None, round_of))
        steps += self._extend_many_steps(lock_names)
        redis_py: dict[str, Any] = {
            RP_MANY: RedisPyRenewMany(self.server.url),
            RP_PIPE: RedisPyPipelinedExtend(self.server.url),
            RP_EXTEND: RedisPyExtend(self.server.url, self.workload.extend_locks),
            RP_MANY_PIPE: RedisPyPipelinedRenewMany(self.server.url),
        }
        self.admin.flushall()
        warm = hold(self.setup, names("warm", 2000))
        for label, contender in redis_py.items():
            self.closers.append(contender.close)
            contender.renew(warm)

            steps.append(self._step(label, lambda: hold(self.setup, lock_names), contender.renew))
        return steps

    def _step(self, label: str, prepare: Callable[[], Any], renew: Callable[[Any], Timing]) -> Step:
        """A measurement on an emptied server: ``prepare()`` untimed (taking the locks to renew),
        then ``renew`` of what it made, with the server's script time counted from zero."""
        def step() -> dict[str, float]:
            self.admin.flushall()
            prepared = prepare()
            self.admin.config_resetstat()
            timing = renew(prepared)
            server_us = self._evalsha_usec() / timing.ops
            return self._record(label, timing.rate, timing.cpu / timing.ops, server_us)

        return label, step

    def _extend_many_steps(self, lock_names: list[str]) -> list[Step]:
        steps: list[Step] = []
        for label, core in CORES.items():
            if not core_available(core):
                continue
            contender = TurbolockExtendMany(self.server.url, core)
            self.closers.append(contender.close)
            self.admin.flushall()
            contender.extend(contender.take(names("warm", 2000)))
            take = partial(contender.take, lock_names)
            steps.append(self._step(EXTEND_MANY[label], take, contender.extend))
        return steps

    def measure_throughput(self) -> None:
        lock_names = names("renew", self.workload.locks)
        steps = self.throughput_steps(lock_names)
        repeats = self.workload.repeats
        for repeat in range(repeats):
            shift = repeat % len(steps)
            for label, step in steps[shift:] + steps[:shift]:
                values = step()
                for sample_key, value in values.items():
                    self.samples[sample_key].append(value)
                progress(f"[{repeat + 1}/{repeats}] {label:44s} {values[key(THROUGHPUT, label)]:>9,.0f}/s, "
                         f"{values[key(CPU, label)]:6.1f} ms CPU and {values[key(SERVER, label)]:.2f} us "
                         "server per 10k / per renewal")
            anchors = {label: self.samples[key(THROUGHPUT, label)][-1] for label in ANCHORS}
            best = max(anchors, key=anchors.__getitem__)
            self.best[best] += 1
            for section in (THROUGHPUT, CPU, SERVER):
                self.samples[key(section, RP_BEST)].append(self.samples[key(section, best)][-1])
        for close in self.closers:
            close()
        self.closers.clear()

    def measure_steady(self) -> None:
        w = self.workload
        labels = [label for label, core in CORES.items() if core_renews(core)]
        if not labels:
            return
        interval = w.steady_interval
        progress(f"steady state: idle baseline for {w.baseline_seconds:g} s")
        wall, cpu = time.monotonic(), time.process_time()
        time.sleep(w.baseline_seconds)
        baseline = (time.process_time() - cpu) / (time.monotonic() - wall)
        renewers = {label: SteadyRenewer(self.server.url, CORES[label], w.steady_ttl, w.steady_renew_before)
                    for label in labels}
        started: dict[str, SteadyRenewer] = {}
        origins: dict[str, float] = {}
        marks: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
        # (when, 0 = sample before 1 = start at the same instant, what, which core)
        events: list[tuple[float, int, str, str]] = [(time.monotonic(), 1, "start", labels[0])]
        progress(f"steady state: {w.steady_locks:,} locks per core ({', '.join(labels)}), "
                 f"ttl {w.steady_ttl:g} s, renewed every {interval:g} s, {w.steady_cycles} intervals each "
                 f"(about {interval * (w.steady_cycles + 1) + 5:.0f} s)")
        try:
            while events:
                when, _, what, label = heapq.heappop(events)
                delay = when - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if what == "start":
                    renewer = renewers[label]
                    origin = renewer.start(names(f"steady-{CORES[label]}", w.steady_locks))
                    started[label] = renewer
                    origins[label] = origin
                    for k in range(w.steady_cycles + 1):
                        heapq.heappush(events, (origin + interval / 2 + k * interval, 0, "mark", label))
                    following = labels.index(label) + 1
                    if following < len(labels):
                        next_start = origin + interval / len(labels)
                        heapq.heappush(events, (next_start, 1, "start", labels[following]))
                    continue
                marks[label].append({"t": time.monotonic(), "process": time.process_time(),
                                     "threads": {name: r.cpu() for name, r in started.items()}})
            outcomes = {label: renewers[label].outcome() for label in labels}
            rounds = {label: list(renewers[label].probe.rounds) for label in labels}
        finally:
            for renewer in renewers.values():
                renewer.forget()
                renewer.close()
            self.admin.flushall()
        self._steady_samples(labels, marks, rounds, interval)
        self.steady = {
            "setting": {"locks": w.steady_locks, "ttl": w.steady_ttl, "renew_before": w.steady_renew_before,
                        "interval": interval, "cycles": w.steady_cycles,
                        "normalised_to": {"ttl": REFERENCE_TTL, "interval": REFERENCE_INTERVAL}},
            "idle_baseline_process_cpu_percent": baseline * 100,
            "origins": origins,
            "marks": marks,
            "rounds": {label: [dataclasses.asdict(r) for r in rs] for label, rs in rounds.items()},
            "fewest_renewals_per_lock": {label: o[0] for label, o in outcomes.items()},
            "lost": {label: o[1] for label, o in outcomes.items()},
            "cross_check": _cross_check(labels, marks, baseline),
        }
        for label, (fewest, lost) in outcomes.items():
            if lost or fewest < w.steady_cycles:
                raise BenchmarkError(f"steady state {label}: {lost} locks lost, fewest renewals {fewest}")

    def _steady_samples(self, labels: list[str], marks: dict[str, list[dict[str, Any]]],
                        rounds: dict[str, list[Any]], interval: float) -> None:
        for label in labels:
            for first, second in zip(marks[label], marks[label][1:], strict=False):
                span = second["t"] - first["t"]
                total = second["threads"][label] - first["threads"][label]
                inside = [r for r in rounds[label] if first["t"] <= r.start < second["t"]]
                if not inside:
                    progress(f"steady state {label}: a window of {span:.1f} s held no round; skipped")
                    continue
                round_cpu = sum(r.cpu for r in inside)
                ticks = (total - round_cpu) / span * 100
                per_round = round_cpu / len(inside) / REFERENCE_INTERVAL * 100
                self.samples[key(STEADY_MEASURED, label)].append(total / span * 100)
                self.samples[key(STEADY, f"{label}/rounds")].append(per_round)
                self.samples[key(STEADY, f"{label}/ticks")].append(ticks)
                self.samples[key(STEADY, label)].append(per_round + ticks)
                progress(f"steady state {label}: {total / span * 100:.2f}% over {span:.1f} s "
                         f"({len(inside)} round of {round_cpu * 1000:.0f} ms CPU; ticks {ticks:.2f}%); "
                         f"normalised {per_round + ticks:.2f}%")

    def measure_memory(self) -> None:
        lock_names = names("memory", self.workload.memory_locks)
        for label, core in CORES.items():
            if not core_renews(core):
                continue
            self.admin.flushall()
            lease = retained_per_lease(self.server.url, core, lock_names, auto_renew=False)
            self.admin.flushall()
            renewed = retained_per_lease(self.server.url, core, lock_names, auto_renew=True)
            self.samples[key(MEMORY, f"{label}/lease")].append(lease)
            self.samples[key(MEMORY, label)].append(renewed - lease)
            progress(f"memory {label}: {lease:,.0f} bytes per lease, {renewed:,.0f} with auto_renew: "
                     f"{renewed - lease:,.0f} for renewal")

    def close(self) -> None:
        for close in self.closers:
            close()
        self.setup.close()
        self.admin.close()


def _cross_check(labels: list[str], marks: dict[str, list[dict[str, Any]]],
                 baseline: float) -> dict[str, Any]:
    """Over the span where every core's renewer runs and the main thread sleeps: process CPU
    minus the idle baseline, against the renewer threads' own clocks."""
    first, last = marks[labels[-1]][0], marks[labels[0]][-1]
    span = last["t"] - first["t"]
    if span <= 0:
        return {}
    process = (last["process"] - first["process"]) / span * 100 - baseline * 100
    threads = {label: (last["threads"][label] - first["threads"][label]) / span * 100 for label in labels}
    return {"seconds": span, "process_minus_baseline_percent": process, "renewer_threads_percent": threads,
            "renewer_threads_total_percent": sum(threads.values())}


def profile(server: RedisServer, count: int, top: int) -> None:
    """cProfile one round per core, inside the renewer thread (cProfile inflates cheap calls: read
    the ranking; ``py-spy record`` gives undistorted shares)."""
    admin = redis.Redis.from_url(server.url)
    for script in _scripts.ALL:
        admin.script_load(script.source)
    lock_names = names("renew", count)
    for label, core in CORES.items():
        if not core_renews(core):
            progress(f"{label}: n/a")
            continue
        contender = TurbolockRenewer(server.url, core)
        try:
            admin.flushall()
            contender.renew_round(names("warm", 2000), lead=round_lead(2000))
            contender.probe.profiler = cProfile.Profile()
            admin.flushall()
            timing, round_ = contender.renew_round(lock_names, lead=round_lead(count))
            print(f"== {label}: {timing.rate:,.0f} renewals/s under cProfile, "
                  f"{round_.cpu * 1000:.0f} ms renewer CPU for {count:,} locks")
            print(contender.profile_report(top))
        finally:
            contender.close()
    admin.close()


def _meta(workload: RenewalWorkload, server_version: str, started: float, argv: list[str],
          best: Counter[str]) -> dict[str, Any]:
    from redis.utils import HIREDIS_AVAILABLE

    return {
        "command": " ".join(["python -m benchmarks.renewal_compare", *argv]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": round(time.monotonic() - started, 1),
        "workload": dataclasses.asdict(workload),
        "anchors": ANCHORS,
        "best_redis_py": dict(best),
        "round_lead": round_lead(workload.locks),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "redis_server": server_version,
        "redis_py": redis.__version__,
        "redis_py_hiredis": HIREDIS_AVAILABLE,
        "turbolock": turbolock.__version__,
        "turbolock_c_renews": core_renews("c"),
    }


def _footer(meta: dict[str, Any], steady: dict[str, Any]) -> str:
    best = ", ".join(f"{label} in {n}" for label, n in Counter(meta["best_redis_py"]).most_common())
    lines = [
        "",
        f"{RP_BEST}: per repeat, the fastest of the three anchors ({best or 'none'}).",
        f"turbolock: the client's renewer thread, one round over locks due together "
        f"({meta['round_lead']:g} s after the acquire was sent); CPU is that thread's.",
    ]
    check = steady.get("cross_check")
    if check:
        threads = ", ".join(f"{label} {value:.2f}%"
                            for label, value in check["renewer_threads_percent"].items())
        lines.append(f"steady-state cross-check over {check['seconds']:.0f} s: process CPU minus idle "
                     f"baseline ({steady['idle_baseline_process_cpu_percent']:.2f}%) = "
                     f"{check['process_minus_baseline_percent']:.2f}%; renewer threads {threads}")
    lines.append(f"{meta['command']}: {meta['workload']['repeats']} repeats in {meta['seconds']:.0f} s, "
                 f"load average {meta['load_average'][0]:.2f}, {meta['cpus']} CPUs; turbolock c "
                 f"{'renews' if meta['turbolock_c_renews'] else 'n/a (no TimerWheel)'}; redis-py's hiredis "
                 f"parser {'on' if meta['redis_py_hiredis'] else 'off'}; redis-server {meta['redis_server']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.renewal_compare",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="20k locks, 3 repeats, steady state at ttl 9 s (about 30 s)")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    parser.add_argument("--profile", action="store_true",
                        help="only cProfile one renewal round per core (top 25 by own time); no JSON")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    workload = QUICK if args.quick else DEFAULT
    started = time.monotonic()
    if args.profile:
        with RedisServer() as server:
            profile(server, workload.locks, 25)
        return 0
    progress(f"renewal benchmarks: {workload.locks:,} locks, {workload.repeats} repeats; "
             f"steady state {workload.steady_locks:,} locks; a throwaway redis-server")
    with RedisServer() as server:
        run = Run(server, workload)
        try:
            server_version = str(run.admin.info("server")["redis_version"])
            run.measure_throughput()
            run.measure_memory()
            run.measure_steady()
        finally:
            run.close()
    results = [(section, evaluate(section, run.samples)) for section in sections(workload)]
    meta = _meta(workload, server_version, started, args_list, run.best)
    print(render(results), end="")
    print(_footer(meta, run.steady))
    directory = os.path.dirname(os.path.abspath(args.json))
    os.makedirs(directory, exist_ok=True)
    with open(args.json, "w") as out:
        json.dump({"meta": meta, "sections": to_json(results), "steady": run.steady,
                   "samples": dict(run.samples)}, out, indent=2)
    progress(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
