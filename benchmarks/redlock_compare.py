"""Redlock over 3 masters, in one run: turbolock (both cores) against pottery's Redlock, and
turbolock's bulk Redlock against its own single-server bulk acquire.

    python -m benchmarks.redlock_compare [--quick] [--json PATH]

Starts three throwaway redis-servers. Each repeat runs every contender of a section once,
side by side, the order rotating from repeat to repeat; every server is flushed before every
measurement; all contenders use the same key names, ttl and chunk size. Alongside, the
"socket floor" row runs the same commands (SET NX PX to 3 masters, then an EVALSHA release to
3 masters) over plain sockets with no client at all: what no Python client can beat here.
Progress goes to stderr, the table to stdout, samples and ratios to JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from turbolock import RedlockClient
from turbolock.bench.contenders import BenchmarkError, SocketLoop, Timing, Turbolock, core_available, timed
from turbolock.bench.workload import CHUNK_SIZE, KEY_PREFIX, TTL_SECONDS, names
from turbolock.redis_server import RedisServer

from .publish import publish, run_meta
from .report import Comparison, Row, Section, evaluate, key

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "redlock_compare.json")
MASTERS = 3

RL_C = "turbolock Redlock c"
RL_PY = "turbolock Redlock py"
POTTERY = "pottery Redlock"
FLOOR = "socket floor (3 masters)"
ONE_C = "turbolock single-server c"
ONE_PY = "turbolock single-server py"
CORES = {RL_C: "c", RL_PY: "py"}
SINGLE = {RL_C: ONE_C, RL_PY: ONE_PY}

PAIRS = "redlock-pairs"
BULK_ACQUIRE = "redlock-bulk-acquire"
BULK_RELEASE = "redlock-bulk-release"

SECTIONS = (
    Section(PAIRS, f"Redlock acquire+release over {MASTERS} masters, sequential", "pairs/s", (
        Row(RL_C, (Comparison(POTTERY, 10.0), Comparison(FLOOR))),
        Row(RL_PY, (Comparison(POTTERY, 10.0), Comparison(FLOOR))),
        Row(POTTERY),
        Row(FLOOR),
    )),
    Section(BULK_ACQUIRE, f"bulk acquire of distinct locks: Redlock on {MASTERS} masters vs one server",
            "locks/s", (
                Row(RL_C, (Comparison(ONE_C, 0.5),)),
                Row(RL_PY, (Comparison(ONE_PY, 0.5),)),
                Row(ONE_C),
                Row(ONE_PY),
            )),
    Section(BULK_RELEASE, "bulk release of the same locks", "locks/s", (
        Row(RL_C, (Comparison(ONE_C),)),
        Row(RL_PY, (Comparison(ONE_PY),)),
        Row(ONE_C),
        Row(ONE_PY),
    )),
)


@dataclass(frozen=True)
class Workload:
    pairs: int
    pottery_pairs: int
    """pottery is some 20 times slower: fewer pairs keep its repeats as long as the others'."""
    bulk: int
    repeats: int


DEFAULT = Workload(pairs=2000, pottery_pairs=300, bulk=100_000, repeats=5)
QUICK = Workload(pairs=500, pottery_pairs=100, bulk=20_000, repeats=3)

Step = tuple[str, Callable[[], dict[str, float]]]


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class TurbolockRedlock:
    """``RedlockClient`` on one core: try_acquire/release, acquire_many/release_many."""

    def __init__(self, urls: list[str], core: str) -> None:
        self.client = RedlockClient(urls, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE)

    def pairs(self, pair_names: list[str]) -> Timing:
        acquire = self.client.try_acquire
        release = self.client.release

        def run() -> None:
            for name in pair_names:
                lease = acquire(name, TTL_SECONDS)
                if lease is None or not release(lease):
                    raise BenchmarkError(f"turbolock Redlock: {name!r} was not taken and released")

        _, wall, cpu = timed(run)
        return Timing(len(pair_names), wall, cpu)

    def bulk(self, bulk_names: list[str]) -> tuple[Timing, Timing]:
        result, wall, cpu = timed(self.client.acquire_many, bulk_names, TTL_SECONDS)
        leases = result.acquired
        if len(leases) != len(bulk_names):
            raise BenchmarkError(f"turbolock Redlock: {len(bulk_names) - len(leases)} locks not taken "
                                 f"({result.counts()})")
        released, release_wall, release_cpu = timed(self.client.release_many, leases)
        if not all(released):
            raise BenchmarkError("turbolock Redlock: some releases were refused")
        return Timing(len(bulk_names), wall, cpu), Timing(len(leases), release_wall, release_cpu)

    def close(self) -> None:
        self.client.close()


class PotteryRedlock:
    """pottery's ``Redlock`` as its documentation shows it: one object per lock, acquire, release."""

    def __init__(self, urls: list[str]) -> None:
        from pottery import Redlock

        self.redlock = Redlock
        self.masters = [redis.Redis.from_url(url) for url in urls]

    def pairs(self, pair_names: list[str]) -> Timing:
        redlock, masters = self.redlock, self.masters

        def run() -> None:
            for name in pair_names:
                lock = redlock(key=KEY_PREFIX + name, masters=masters, auto_release_time=TTL_SECONDS)
                if not lock.acquire(blocking=False):
                    raise BenchmarkError(f"pottery: {name!r} was not taken")
                lock.release()

        _, wall, cpu = timed(run)
        return Timing(len(pair_names), wall, cpu)

    def close(self) -> None:
        for master in self.masters:
            master.close()


class Run:
    def __init__(self, servers: list[RedisServer], workload: Workload) -> None:
        self.servers = servers
        self.urls = [server.url for server in servers]
        self.workload = workload
        self.admins = [redis.Redis.from_url(url) for url in self.urls]
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.closers: list[Callable[[], None]] = []

    def flush(self) -> None:
        for admin in self.admins:
            admin.flushall()

    def _keep(self, contender: Any) -> Any:
        self.closers.append(contender.close)
        return contender

    def pair_steps(self) -> list[Step]:
        pair_names = names("pair", self.workload.pairs)
        pottery_names = pair_names[:self.workload.pottery_pairs]
        contenders: dict[str, Any] = {label: self._keep(TurbolockRedlock(self.urls, core))
                                      for label, core in CORES.items() if core_available(core)}
        contenders[POTTERY] = self._keep(PotteryRedlock(self.urls))
        contenders[FLOOR] = self._keep(SocketLoop([(server.host, server.port) for server in self.servers]))
        steps: list[Step] = []
        for label, contender in contenders.items():
            contender.pairs(["warm:0", "warm:1"])
            chosen = pottery_names if label == POTTERY else pair_names

            def step(contender: Any = contender, label: str = label,
                     chosen: list[str] = chosen) -> dict[str, float]:
                return {key(PAIRS, label): contender.pairs(chosen).rate}

            steps.append((label, step))
        return steps

    def bulk_steps(self) -> list[Step]:
        bulk_names = names("bulk", self.workload.bulk)
        steps: list[Step] = []
        for label, core in CORES.items():
            if not core_available(core):
                continue
            for step_label, contender in ((label, TurbolockRedlock(self.urls, core)),
                                          (SINGLE[label], Turbolock(self.urls[0], core))):
                self._keep(contender)
                contender.bulk([f"warm:{i}" for i in range(2000)])

                def step(contender: Any = contender, label: str = step_label) -> dict[str, float]:
                    acquire, release = contender.bulk(bulk_names)
                    return {key(BULK_ACQUIRE, label): acquire.rate, key(BULK_RELEASE, label): release.rate}

                steps.append((step_label, step))
        return steps

    def measure(self) -> None:
        if not core_available("c"):
            progress(f"{RL_C}: n/a (the compiled core turbolock._core_c does not import)")
        groups = [("pairs", self.pair_steps()), ("bulk", self.bulk_steps())]
        repeats = self.workload.repeats
        for repeat in range(repeats):
            for group, steps in groups:
                shift = repeat % len(steps)
                for label, step in steps[shift:] + steps[:shift]:
                    self.flush()
                    values = step()
                    for sample_key, value in values.items():
                        self.samples[sample_key].append(value)
                    shown = ", ".join(f"{k.split('/', 1)[0]} {v:,.0f}/s" for k, v in values.items())
                    progress(f"[{repeat + 1}/{repeats}] {group:5s} {label:28s} {shown}")

    def close(self) -> None:
        for close in self.closers:
            close()
        for admin in self.admins:
            admin.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.redlock_compare",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, 3 repeats (about 20 s)")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    try:
        import pottery  # noqa: F401
    except ImportError:
        parser.error("pottery is not installed (pip install pottery)")
    workload = QUICK if args.quick else DEFAULT
    started = time.monotonic()
    progress(f"Redlock benchmarks: {workload.pairs} pairs ({workload.pottery_pairs} for pottery), "
             f"{workload.bulk:,} bulk locks, {workload.repeats} repeats; {MASTERS} throwaway redis-servers")
    servers: list[RedisServer] = []
    try:
        for _ in range(MASTERS):
            servers.append(RedisServer().start())
        run = Run(servers, workload)
        try:
            server_version = str(run.admins[0].info("server")["redis_version"])
            run.measure()
        finally:
            run.close()
    finally:
        for server in servers:
            server.stop()
    results = evaluate(run.samples, SECTIONS)
    from importlib.metadata import version

    meta = run_meta("redlock_compare", args_list, started, server_version,
                    workload=dataclasses.asdict(workload), masters=MASTERS, pottery=version("pottery"))
    publish(results, run.samples, meta, args.json, f"{workload.repeats} repeats, pottery {meta['pottery']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
