"""The flash-sale workload: many workers, one lock, each taking it, doing a short critical
section and giving it back, as fast as they can. turbolock (woken by releases, polling
only, and fair, strict FIFO; both cores) against redis-py's Lock (``sleep=0.001``, with hiredis and without)
and against the best hand-written redis-py waiter, woken by a PUBLISH in the release script
(``pubsub_lock.PubSubLock``, with hiredis). The limit row: the critical section run back to
back by one worker with no lock at all, which no lock's hand-offs can beat.

    python -m benchmarks.contention_compare [--quick] [--json PATH]

Starts its own redis-server. Two shapes: 8 threads in one process, and 4 processes of one
thread each. Each repeat runs every contender once for the same time on the same lock name,
the order rotating from repeat to repeat. A worker loops: blocking acquire, the scenario's
critical section (``GET`` a counter, 0.5 ms of work, ``SET`` it plus one, through redis-py with
hiredis for every contender), release; the counter must equal the acquisitions. Reported per
contender: hand-offs per second, owner changes per 100 hand-offs (a new worker took the lock),
the slowest worker's acquisitions against the fastest's, and how long the lock stayed free
after a release before another worker had it (p50 and p99, beside a PING's round trip
measured in the same repeat). Progress goes to stderr, the table to stdout, samples and
ratios to JSON.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from typing import Any

import redis
from redis._parsers import _HiredisParser, _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

from turbolock import LockClient
from turbolock.bench.contenders import core_available
from turbolock.redis_server import RedisServer

from .publish import publish, run_meta
from .pubsub_lock import PubSubLock
from .report import Comparison, Row, Section, evaluate, key

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "contention_compare.json")
KEY_PREFIX = "bench:contention:"
LOCK = "flash-sale"
COUNTER = "bench:contention:data:sold"
TTL = 10.0
CRITICAL_SLEEP = 0.0005
"""The critical section is the flash-sale scenario's: read the count, 0.5 ms of work, write it
back plus one (a lost update would show as fewer sold than acquisitions)."""

TL_WOKEN = {"c": "turbolock c, woken", "py": "turbolock py, woken"}
TL_POLLING = "turbolock c, polling only"
TL_FAIR = "turbolock c, fair=True (strict FIFO)"
RP_HI = "redis-py Lock sleep=1ms + hiredis"
RP_PURE = "redis-py Lock sleep=1ms, no hiredis"
RP_PUBSUB = "redis-py by hand, woken by pub/sub + hiredis"
RTT = "PING round trip (redis-py + hiredis)"
ALONE = "the critical section alone, one worker, no lock"
"""The limit of any lock's hand-offs: GET, 0.5 ms, SET back to back with nobody to wait for."""

SHAPES = {"threads": (1, 8), "processes": (4, 1)}
"""Shape name: (processes, threads per process)."""

CTX = multiprocessing.get_context("fork")


def _rows(baseline_target: float | None, limit: bool = False) -> tuple[Row, ...]:
    def versus(target: float | None) -> tuple[Comparison, ...]:
        return (Comparison(RP_HI, target), Comparison(RP_PURE), Comparison(RP_PUBSUB),
                *((Comparison(ALONE),) if limit else ()))

    return (Row(TL_WOKEN["c"], versus(baseline_target)), Row(TL_WOKEN["py"], versus(baseline_target)),
            Row(TL_POLLING, versus(None)), Row(TL_FAIR, versus(None)), Row(RP_HI), Row(RP_PURE),
            Row(RP_PUBSUB), *((Row(ALONE),) if limit else ()))


def _plain_rows() -> tuple[Row, ...]:
    return (*(Row(row.contender) for row in _rows(None)), Row(RTT))


def _sections(shape: str) -> tuple[Section, ...]:
    workers = "8 threads" if shape == "threads" else "4 processes"
    return (
        Section(f"{shape}-handoffs", f"one lock, {workers}: hand-offs per second", "hand-offs/s",
                _rows(4.0, limit=True)),
        Section(f"{shape}-owner-changes", f"one lock, {workers}: owner changes per 100 hand-offs", "per 100",
                _rows(1.0), "{:,.1f}"),
        Section(f"{shape}-fairness", f"one lock, {workers}: slowest worker's acquisitions / fastest's",
                "share", _rows(None), "{:.2f}"),
        Section(f"{shape}-delay-p50", f"one lock, {workers}: lock free after a release before a waiter "
                                      "has it, p50", "ms", _plain_rows(), "{:.3f}"),
        Section(f"{shape}-delay-p99", f"one lock, {workers}: the same, p99 (target: 2 round trips + 1 ms)",
                "ms", _plain_rows(), "{:.3f}"),
    )


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _worker(contender: str, url: str, core: str, threads: int, first_id: int, start_at: float,
            stop_at: float, results: Any) -> None:
    """One process: ``threads`` workers looping acquire / INCR / release until ``stop_at``."""
    data = redis.Redis.from_url(url, parser_class=_HiredisParser if HIREDIS_AVAILABLE else _RESP2Parser)
    locks: list[Any]
    if contender.startswith("turbolock"):
        client = LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, timeout=TTL,
                                     wake_waiters=contender != TL_POLLING)
        locks = [client.lock(LOCK, TTL, timeout=TTL, fair=contender == TL_FAIR) for _ in range(threads)]
    elif contender == RP_PUBSUB:
        rp = redis.Redis.from_url(url, parser_class=_HiredisParser if HIREDIS_AVAILABLE else _RESP2Parser,
                                  max_connections=2 * threads + 1)  # one subscribed per waiter
        locks = [PubSubLock(rp, KEY_PREFIX + LOCK, TTL, TTL) for _ in range(threads)]
    else:
        parser = _HiredisParser if contender == RP_HI else _RESP2Parser
        rp = redis.Redis.from_url(url, parser_class=parser, max_connections=threads + 1)
        locks = [rp.lock(KEY_PREFIX + LOCK, timeout=TTL, sleep=0.001, blocking_timeout=TTL)
                 for _ in range(threads)]
    records: list[tuple[int, float, float]] = []

    def loop(worker_id: int, lock: Any) -> None:
        mine = []
        clock = time.monotonic
        while clock() < start_at:
            time.sleep(0.0005)
        while clock() < stop_at:
            if not lock.acquire():
                raise RuntimeError(f"{contender}: a worker waited {TTL:g}s for the lock")
            acquired = clock()
            sold = int(data.get(COUNTER) or 0)
            time.sleep(CRITICAL_SLEEP)
            data.set(COUNTER, sold + 1)
            lock.release()
            mine.append((worker_id, acquired, clock()))
        records.extend(mine)

    workers = [threading.Thread(target=loop, args=(first_id + i, lock)) for i, lock in enumerate(locks)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    results.put(records)


def run_once(contender: str, url: str, shape: str, seconds: float) -> dict[str, float]:
    processes, threads = SHAPES[shape]
    core = "py" if contender == TL_WOKEN["py"] else "c"
    admin = redis.Redis.from_url(url)
    admin.delete(COUNTER, KEY_PREFIX + LOCK)
    results = CTX.Queue()
    start_at = time.monotonic() + 0.5
    children = [CTX.Process(target=_worker, args=(contender, url, core, threads, p * threads, start_at,
                                                  start_at + seconds, results))
                for p in range(processes)]
    for child in children:
        child.start()
    records: list[tuple[int, float, float]] = []
    for _ in children:
        records.extend(results.get(timeout=seconds + 60))
    for child in children:
        child.join(10)
    sold = int(admin.get(COUNTER) or 0)
    admin.close()
    if sold != len(records):
        raise RuntimeError(f"{contender}: {sold} increments for {len(records)} acquisitions: a lost update")
    records.sort(key=lambda record: record[1])
    changes = [(prev, nxt) for prev, nxt in itertools.pairwise(records) if prev[0] != nxt[0]]
    gaps = sorted((nxt[1] - prev[2]) * 1000.0 for prev, nxt in changes) or [0.0]
    counts = defaultdict(int)
    for record in records:
        counts[record[0]] += 1
    per_worker = [counts.get(w, 0) for w in range(processes * threads)]
    return {
        "handoffs": len(records) / seconds,
        "owner-changes": 100.0 * len(changes) / max(1, len(records) - 1),
        "fairness": min(per_worker) / max(1, max(per_worker)),
        "delay-p50": statistics.median(gaps),
        "delay-p99": gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))],
    }


def alone_per_second(url: str, seconds: float) -> float:
    """``ALONE``: the critical section run back to back by one worker, for ``seconds``."""
    data = redis.Redis.from_url(url, parser_class=_HiredisParser if HIREDIS_AVAILABLE else _RESP2Parser)
    data.delete(COUNTER)
    done = 0
    clock = time.monotonic
    began = clock()
    stop_at = began + seconds
    while clock() < stop_at:
        sold = int(data.get(COUNTER) or 0)
        time.sleep(CRITICAL_SLEEP)
        data.set(COUNTER, sold + 1)
        done += 1
    elapsed = clock() - began
    if int(data.get(COUNTER) or 0) != done:
        raise RuntimeError(f"{ALONE}: the counter does not match the {done} runs")
    data.close()
    return done / elapsed


def ping_ms(url: str) -> float:
    client = redis.Redis.from_url(url, parser_class=_HiredisParser if HIREDIS_AVAILABLE else _RESP2Parser)
    client.ping()
    times = []
    for _ in range(2000):
        started = time.perf_counter()
        client.ping()
        times.append((time.perf_counter() - started) * 1000.0)
    client.close()
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.contention_compare",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s per run, 3 repeats")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    seconds, repeats = (1.0, 3) if args.quick else (3.0, 7)
    contenders = [TL_WOKEN[core] for core in ("c", "py") if core_available(core)]
    contenders += [TL_POLLING, TL_FAIR, RP_HI, RP_PURE, RP_PUBSUB]
    started = time.monotonic()
    samples: dict[str, list[float]] = defaultdict(list)
    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        server_version = str(admin.info("server")["redis_version"])
        admin.close()
        for repeat in range(repeats):
            for shape in SHAPES:
                rtt = ping_ms(server.url)
                for section in ("delay-p50", "delay-p99"):
                    samples[key(f"{shape}-{section}", RTT)].append(rtt)
                samples[key(f"{shape}-handoffs", ALONE)].append(alone_per_second(server.url, seconds))
                shift = repeat % len(contenders)
                for contender in contenders[shift:] + contenders[:shift]:
                    measured = run_once(contender, server.url, shape, seconds)
                    for name, value in measured.items():
                        samples[key(f"{shape}-{name}", contender)].append(value)
                    progress(f"[{repeat + 1}/{repeats}] {shape:9s} {contender:38s} "
                             f"{measured['handoffs']:8,.0f}/s  changes {measured['owner-changes']:5.1f}  "
                             f"fairness {measured['fairness']:.2f}  delay p50 {measured['delay-p50']:.3f} "
                             f"p99 {measured['delay-p99']:.3f} ms (ping {rtt:.3f})")
    sections = [section for shape in SHAPES for section in _sections(shape)]
    results = evaluate(samples, sections)
    meta = run_meta(runner="contention_compare", args=args_list, started=started,
                    server_version=server_version,
                    seconds_per_run=seconds, repeats=repeats)
    publish(results, samples, meta, args.json, f"{seconds:g} s per run, {repeats} repeats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
