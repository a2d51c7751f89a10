"""Sharded jobs: a pool of worker processes each claims k free shards out of many, at once.
turbolock's claim (both cores) against the best hand-written redis-py approach.

    python -m benchmarks.claim_compare [--quick] [--json PATH]

Starts its own redis-server. WORKERS processes each claim K of SHARDS shards at the same moment
(a barrier), hold them until every worker has claimed, then release them; a repeat is ROUNDS
such rounds per contender, the contenders interleaved and their order rotating from repeat to
repeat. Claims per second count the shards claimed in a round over the round's span (first
start to last finish); round trips are per claim call; fairness is the fewest over the most
shards any worker got in a round (the worst round of the repeat). Every round is checked: each
worker got its K shards and no shard went to two workers. Progress goes to stderr, the table
to stdout, samples and medians to JSON.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import redis

from turbolock import LockClient
from turbolock._wire import scripts as _scripts
from turbolock.bench.contenders import BenchmarkError, core_available
from turbolock.bench.stats import paired_ratio, summarize
from turbolock.bench.workload import CHUNK_SIZE, KEY_PREFIX, TOKEN_BYTES, TTL_MS, TTL_SECONDS
from turbolock.redis_server import RedisServer

from .publish import publish, run_meta
from .report import Comparison, RatioResult, Row, RowResult, Section, SectionResult, key

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "claim_compare.json")

WORKERS = 8
SHARDS = 10_000
K = 100

TL_C = "turbolock claim c"
TL_PY = "turbolock claim py"
RP_WINDOW = "redis-py pipelined window"
CORES = {TL_C: "c", TL_PY: "py"}

RATE = "claim-rate"
TRIPS = "claim-round-trips"
LATENCY = "claim-latency"
CPU = "claim-cpu"
FAIRNESS = "claim-fairness"

SECTIONS = (
    Section(RATE, f"{WORKERS} processes each claim k={K} of {SHARDS:,} shards at once", "shards/s", (
        Row(TL_C, (Comparison(RP_WINDOW),)),
        Row(TL_PY, (Comparison(RP_WINDOW),)),
        Row(RP_WINDOW),
    )),
    Section(TRIPS, "round trips per claim call", "round trips", (Row(TL_C), Row(TL_PY), Row(RP_WINDOW)),
            "{:.2f}"),
    Section(LATENCY, "one claim call, median over the repeat's calls", "ms", (
        Row(TL_C), Row(TL_PY), Row(RP_WINDOW)), "{:.2f}"),
    Section(CPU, "client CPU per claim call (time.process_time), median", "ms", (
        Row(TL_C), Row(TL_PY), Row(RP_WINDOW)), "{:.2f}"),
    Section(FAIRNESS, "fewest / most shards per worker, worst round of a repeat", "ratio", (
        Row(TL_C), Row(TL_PY), Row(RP_WINDOW)), "{:.2f}"),
)


@dataclass(frozen=True)
class Workload:
    repeats: int
    rounds: int
    """Claim rounds per contender per repeat."""


DEFAULT = Workload(repeats=7, rounds=50)
QUICK = Workload(repeats=3, rounds=10)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def shard_names() -> list[str]:
    return [f"shard:{i:05d}" for i in range(SHARDS)]


class Claimer(Protocol):
    def claim(self, names: list[str], k: int) -> tuple[list[str], int]:
        """The names taken, and the round trips it took."""
        ...

    def release(self, taken: list[str]) -> None: ...


class CountingExecutor:
    """A client's executor that counts the calls sent through it: one per chunk, a round trip each."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def many(self, *args: Any, **kwargs: Any) -> list[object]:
        self.calls += 1
        result: list[object] = self.inner.many(*args, **kwargs)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class TurbolockClaim:
    """``acquire_many(..., limit=k)`` on one core; ``release_many`` afterwards."""

    def __init__(self, url: str, core: str) -> None:
        self.client = LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE,
                                          max_connections=1)
        self.counter = CountingExecutor(self.client._exec)
        self.client._exec = self.counter  # type: ignore[assignment]
        self.leases: dict[Any, Any] = {}

    def claim(self, names: list[str], k: int) -> tuple[list[str], int]:
        before = self.counter.calls
        result = self.client.acquire_many(names, TTL_SECONDS, limit=k)
        trips = self.counter.calls - before
        self.leases = {lease.name: lease for lease in result.acquired}
        return list(self.leases), trips

    def release(self, taken: list[str]) -> None:
        if not all(self.client.release_many([self.leases[name] for name in taken])):
            raise BenchmarkError("turbolock: a release was refused")

    def close(self) -> None:
        self.client.close()


class RedisPyWindow:
    """The best by hand with redis-py: from a random start, a pipeline of ``SET NX PX`` over a
    window of as many names as are still wanted, repeated until k are taken or the names run
    out. A window no larger than what is still wanted never takes too many, so there is never
    an overshoot to release (a larger window would save round trips only to spend one on that)."""

    def __init__(self, url: str) -> None:
        self.redis = redis.Redis.from_url(url)
        self.sha = self.redis.script_load(_scripts.RELEASE.source)
        self.tokens: dict[str, bytes] = {}

    def claim(self, names: list[str], k: int) -> tuple[list[str], int]:
        count = len(names)
        start = random.randrange(count)
        taken: dict[str, bytes] = {}
        position = trips = 0
        pipe = self.redis.pipeline(transaction=False)
        while len(taken) < k and position < count:
            stop = min(count, position + k - len(taken))
            window = [names[(start + p) % count] for p in range(position, stop)]
            tokens = [os.urandom(TOKEN_BYTES) for _ in window]
            for name, token in zip(window, tokens, strict=True):
                pipe.set(KEY_PREFIX + name, token, nx=True, px=TTL_MS)
            replies = pipe.execute()
            trips += 1
            taken.update((name, token) for name, token, ok in zip(window, tokens, replies, strict=True) if ok)
            position = stop
        self.tokens = taken
        return list(taken), trips

    def release(self, taken: list[str]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for name in taken:
            pipe.evalsha(self.sha, 1, KEY_PREFIX + name, self.tokens[name])
        if pipe.execute().count(1) != len(taken):
            raise BenchmarkError("redis-py: a release was refused")

    def close(self) -> None:
        self.redis.close()


def make_claimer(label: str, url: str) -> Any:
    return RedisPyWindow(url) if label == RP_WINDOW else TurbolockClaim(url, CORES[label])


Record = tuple[int, int, float, float, list[int], int, float]
"""(step, round, started, finished, shard indices taken, round trips, CPU seconds) of one claim."""


def worker(index: int, url: str, schedule: list[str], rounds: int, barrier: Any, out: Any) -> None:
    """One process of the pool: runs every step of ``schedule`` in lockstep with the others."""
    try:
        names = shard_names()
        number = {name: i for i, name in enumerate(names)}
        claimers = {label: make_claimer(label, url) for label in set(schedule)}
        for claimer in claimers.values():
            warm, _ = claimer.claim([f"warm:{index}:{i}" for i in range(20)], 5)
            claimer.release(warm)
        records: list[Record] = []
        for step, label in enumerate(schedule):
            claimer = claimers[label]
            for round_ in range(rounds):
                barrier.wait()
                cpu = time.process_time()
                started = time.monotonic()
                taken, trips = claimer.claim(names, K)
                finished = time.monotonic()
                cpu = time.process_time() - cpu
                barrier.wait()  # every worker holds its shards: the next ones found them taken
                claimer.release(taken)
                shards = [number[name] for name in taken]
                records.append((step, round_, started, finished, shards, trips, cpu))
        for claimer in claimers.values():
            claimer.close()
        out.put((index, records, None))
    except BaseException as exc:
        barrier.abort()
        out.put((index, [], f"{type(exc).__name__}: {exc}"))


def run_pool(url: str, schedule: list[str], rounds: int) -> list[list[Record]]:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    processes = [ctx.Process(target=worker, args=(i, url, schedule, rounds, barrier, out), daemon=True)
                 for i in range(WORKERS)]
    for process in processes:
        process.start()
    per_worker: dict[int, list[Record]] = {}
    try:
        for _ in processes:
            index, records, error = out.get(timeout=300)
            if error is not None:
                raise BenchmarkError(f"worker {index} failed: {error}")
            per_worker[index] = records
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
    return [per_worker[i] for i in range(WORKERS)]


def measure(per_worker: list[list[Record]], schedule: list[str], repeats: int) -> dict[str, list[float]]:
    """Samples per contender and repeat, from every worker's records; checks every round."""
    rounds: dict[tuple[int, int], list[Record]] = defaultdict(list)
    for records in per_worker:
        for record in records:
            rounds[record[0], record[1]].append(record)
    by_step: dict[int, list[list[Record]]] = defaultdict(list)
    for (step, _), claims in sorted(rounds.items()):
        _check_round(schedule[step], claims)
        by_step[step].append(claims)
    samples: dict[str, list[float]] = defaultdict(list)
    for step, step_rounds in sorted(by_step.items()):
        label = schedule[step]
        spans = [max(c[3] for c in claims) - min(c[2] for c in claims) for claims in step_rounds]
        shards = sum(len(c[4]) for claims in step_rounds for c in claims)
        calls = [c for claims in step_rounds for c in claims]
        samples[key(RATE, label)].append(shards / sum(spans))
        samples[key(TRIPS, label)].append(sum(c[5] for c in calls) / len(calls))
        samples[key(LATENCY, label)].append(statistics.median(c[3] - c[2] for c in calls) * 1000.0)
        samples[key(CPU, label)].append(statistics.median(c[6] for c in calls) * 1000.0)
        samples[key(FAIRNESS, label)].append(min(
            min(len(c[4]) for c in claims) / max(len(c[4]) for c in claims) for claims in step_rounds))
        repeat = step // (len(schedule) // repeats) + 1
        progress(f"[{repeat}/{repeats}] {label:26s} {samples[key(RATE, label)][-1]:>9,.0f} shards/s, "
                 f"{samples[key(TRIPS, label)][-1]:.2f} round trips per claim, "
                 f"{samples[key(LATENCY, label)][-1]:.2f} ms per claim")
    return samples


def _check_round(label: str, claims: list[Record]) -> None:
    if len(claims) != WORKERS:
        raise BenchmarkError(f"{label}: {len(claims)} of {WORKERS} workers reported a round")
    counts = [len(c[4]) for c in claims]
    if counts != [K] * WORKERS:
        raise BenchmarkError(f"{label}: workers claimed {counts} shards, not {K} each")
    everything = [shard for c in claims for shard in c[4]]
    if len(set(everything)) != len(everything):
        raise BenchmarkError(f"{label}: a shard went to two workers in one round")


def evaluate(samples: Mapping[str, Sequence[float]]) -> list[SectionResult]:
    results = []
    for section in SECTIONS:
        rows = []
        for row in section.rows:
            values = samples.get(key(section.name, row.contender), ())
            ratios = [RatioResult(c.baseline,
                                  paired_ratio(values, samples.get(key(section.name, c.baseline), ())),
                                  c.target)
                      for c in row.comparisons]
            rows.append(RowResult(row.contender, summarize(values), ratios))
        results.append(SectionResult(section, rows))
    return results


def schedule_for(workload: Workload) -> list[str]:
    labels = [label for label in (TL_C, TL_PY) if core_available(CORES[label])] + [RP_WINDOW]
    schedule = []
    for repeat in range(workload.repeats):
        shift = repeat % len(labels)
        schedule.extend(labels[shift:] + labels[:shift])
    return schedule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.claim_compare",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats of 10 rounds (about 10 s)")
    parser.add_argument("--json", default=DEFAULT_JSON, metavar="PATH", help=f"default: {DEFAULT_JSON}")
    args_list = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(args_list)
    workload = QUICK if args.quick else DEFAULT
    schedule = schedule_for(workload)
    started = time.monotonic()
    progress(f"claim benchmark: {WORKERS} processes, k={K} of {SHARDS:,} shards, {workload.rounds} rounds "
             f"per contender, {workload.repeats} repeats; a throwaway redis-server")
    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        try:
            server_version = str(admin.info("server")["redis_version"])
            per_worker = run_pool(server.url, schedule, workload.rounds)
            left = admin.dbsize()
            if left:
                raise BenchmarkError(f"{left} keys left after every release")
        finally:
            admin.close()
    samples = measure(per_worker, schedule, workload.repeats)
    results = evaluate(samples)
    meta = run_meta("claim_compare", args_list, started, server_version,
                    workload={**asdict(workload), "workers": WORKERS, "shards": SHARDS, "k": K,
                              "chunk_size": CHUNK_SIZE})
    publish(results, samples, meta, args.json, f"{workload.repeats} repeats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
