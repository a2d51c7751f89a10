"""One comparison run: turbolock (both cores), redis-py, a bare Python socket loop and
redis-benchmark on one server.

    python -m benchmarks.compare [--quick] [--json PATH]

Starts its own redis-server. Each repeat runs every contender once, side by side, the order
rotating from repeat to repeat so drift in machine load falls on all of them alike; the
server is flushed before every measurement. Progress goes to stderr; the table to stdout;
the samples, medians and ratios to JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import redis

import turbolock
from turbolock._wire import scripts as _scripts
from turbolock.bench.contenders import (
    RedisPyBatchedRelease,
    RedisPyLock,
    RedisPyPipeline,
    RedisPyScript,
    SocketLoop,
    Turbolock,
    core_available,
)
from turbolock.bench.workload import DEFAULT, QUICK, Workload
from turbolock.redis_server import RedisServer

from . import redis_benchmark as rb
from .memory import bytes_per_lease
from .report import (
    ACQUIRE,
    CPU,
    MEMORY,
    PAIRS,
    PY_LOOP,
    RB_EVALSHA,
    RB_P1_EVALSHA,
    RB_P1_SET,
    RB_SET,
    RELEASE,
    ROUND_TRIP,
    RP_BATCHED,
    RP_LOCK,
    RP_PIPELINE,
    RP_SCRIPT,
    RT_BOUND,
    TL_C,
    TL_PY,
    evaluate,
    key,
    to_json,
)
from .table import render

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "compare.json")
CORES = {TL_C: "c", TL_PY: "py"}

Step = tuple[str, Callable[[], dict[str, float]]]
"""A contender's measurement: its label, and a call returning sample key -> value."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Run:
    def __init__(self, server: RedisServer, workload: Workload) -> None:
        self.server = server
        self.workload = workload
        self.admin = redis.Redis.from_url(server.url)
        self.sha = self.admin.script_load(_scripts.RELEASE.source)
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.closers: list[Callable[[], None]] = []

    def _turbolock(self, label: str) -> Turbolock | None:
        if not core_available(CORES[label]):
            return None
        contender = Turbolock(self.server.url, CORES[label])
        self.closers.append(contender.close)
        return contender

    def single_steps(self) -> list[Step]:
        pair_names = self.workload.pair_names()
        steps: list[Step] = []
        contenders: dict[str, Any] = {label: self._turbolock(label) for label in CORES}
        contenders[RP_SCRIPT] = RedisPyScript(self.server.url)
        contenders[RP_LOCK] = RedisPyLock(self.server.url)
        contenders[PY_LOOP] = SocketLoop([(self.server.host, self.server.port)])
        for label, contender in contenders.items():
            if contender is None:
                continue
            if label not in CORES:
                self.closers.append(contender.close)
            contender.pairs(["warm:0", "warm:1"])

            def step(contender: Any = contender, label: str = label) -> dict[str, float]:
                return {key(PAIRS, label): contender.pairs(pair_names).rate}

            steps.append((label, step))
        steps.append(("redis-benchmark -P 1", self._round_trips))
        return steps

    def _round_trips(self) -> dict[str, float]:
        port, count = self.server.port, self.workload.round_trips
        set_rps = rb.requests_per_second(port, rb.set_nx_px("pair"), count, 1)
        self.admin.flushall()
        evalsha_rps = rb.requests_per_second(port, rb.evalsha("pair", self.sha), count, 1)
        # Two round trips per pair: one SET NX PX and one EVALSHA release.
        bound = 1.0 / (1.0 / set_rps + 1.0 / evalsha_rps)
        return {key(ROUND_TRIP, RB_P1_SET): set_rps, key(ROUND_TRIP, RB_P1_EVALSHA): evalsha_rps,
                key(PAIRS, RT_BOUND): bound}

    def bulk_steps(self) -> list[Step]:
        bulk_names = self.workload.bulk_names()
        steps: list[Step] = []
        contenders: dict[str, Any] = {label: self._turbolock(label) for label in CORES}
        contenders[RP_PIPELINE] = RedisPyPipeline(self.server.url)
        contenders[RP_BATCHED] = RedisPyBatchedRelease(self.server.url)
        for label, contender in contenders.items():
            if contender is None:
                continue
            if label not in CORES:
                self.closers.append(contender.close)
            contender.bulk([f"warm:{i}" for i in range(2000)])

            def step(contender: Any = contender, label: str = label) -> dict[str, float]:
                acquire, release = contender.bulk(bulk_names)
                if label == RP_BATCHED:  # its acquire is RP_PIPELINE's: only its release is its own
                    return {key(RELEASE, label): release.rate}
                return {key(ACQUIRE, label): acquire.rate, key(RELEASE, label): release.rate,
                        key(CPU, label): acquire.cpu / acquire.ops * 10_000}

            steps.append((label, step))
        steps.append(("redis-benchmark -P 1000", self._pipelined))
        return steps

    def _pipelined(self) -> dict[str, float]:
        port, count = self.server.port, self.workload.bulk
        set_rps = rb.requests_per_second(port, rb.set_nx_px("bulk"), count, 1000)
        self.admin.flushall()
        evalsha_rps = rb.requests_per_second(port, rb.evalsha("bulk", self.sha), count, 1000)
        return {key(ACQUIRE, RB_SET): set_rps, key(RELEASE, RB_EVALSHA): evalsha_rps}

    def measure(self) -> None:
        if not core_available("c"):
            progress(f"{TL_C}: n/a (the compiled core turbolock._core_c does not import)")
        groups = [("single", self.single_steps()), ("bulk", self.bulk_steps())]
        repeats = self.workload.repeats
        for repeat in range(repeats):
            for group, steps in groups:
                shift = repeat % len(steps)
                for label, step in steps[shift:] + steps[:shift]:
                    self.admin.flushall()
                    values = step()
                    for sample_key, value in values.items():
                        self.samples[sample_key].append(value)
                    shown = ", ".join(_show(label, k, v) for k, v in values.items())
                    progress(f"[{repeat + 1}/{repeats}] {group:6s} {label:26s} {shown}")

    def measure_memory(self) -> None:
        lock_names = self.workload.bulk_names()
        for label, core in CORES.items():
            if not core_available(core):
                continue
            self.admin.flushall()
            retained, peak = bytes_per_lease(self.server.url, core, lock_names)
            self.samples[key(MEMORY, label)].append(retained)
            self.samples[key("memory-peak", label)].append(peak)
            progress(f"memory {label}: {retained:,.0f} bytes per held lease ({peak:,.0f} at peak)")

    def close(self) -> None:
        for close in self.closers:
            close()
        self.admin.close()


def _show(label: str, sample_key: str, value: float) -> str:
    section, contender = sample_key.split("/", 1)
    if section == CPU:
        return f"{value:.3f} CPU s per 10k"
    return f"{section if contender == label else contender} {value:,.0f}/s"


def _meta(workload: Workload, server_version: str, started: float, argv: list[str]) -> dict[str, Any]:
    from redis.utils import HIREDIS_AVAILABLE

    return {
        "command": " ".join(["python -m benchmarks.compare", *argv]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": round(time.monotonic() - started, 1),
        "workload": dataclasses.asdict(workload),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "redis_server": server_version,
        "redis_py": redis.__version__,
        "redis_py_hiredis": HIREDIS_AVAILABLE,
        "turbolock": turbolock.__version__,
        "turbolock_c": core_available("c"),
    }


def _footer(meta: dict[str, Any]) -> str:
    return (f"\n{meta['command']}: {meta['workload']['repeats']} repeats in {meta['seconds']:.0f} s, "
            f"load average {meta['load_average'][0]:.2f}, {meta['cpus']} CPUs; turbolock c "
            f"{'built' if meta['turbolock_c'] else 'n/a'}; redis-py's hiredis parser "
            f"{'on' if meta['redis_py_hiredis'] else 'off'}; redis-server {meta['redis_server']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, 3 repeats (about 30 s)")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    if not rb.available():
        parser.error("redis-benchmark is not installed (apt-get install redis-tools)")
    workload = QUICK if args.quick else DEFAULT
    started = time.monotonic()
    progress(f"benchmarks: {workload.pairs} pairs and {workload.bulk:,} bulk locks, "
             f"{workload.repeats} repeats; a throwaway redis-server")
    with RedisServer() as server:
        run = Run(server, workload)
        try:
            server_version = str(run.admin.info("server")["redis_version"])
            run.measure()
            run.measure_memory()
        finally:
            run.close()
    results = evaluate(run.samples)
    meta = _meta(workload, server_version, started, args_list)
    print(render(results), end="")
    print(_footer(meta))
    directory = os.path.dirname(os.path.abspath(args.json))
    os.makedirs(directory, exist_ok=True)
    with open(args.json, "w") as out:
        json.dump(to_json(results, run.samples, meta), out, indent=2)
    progress(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
