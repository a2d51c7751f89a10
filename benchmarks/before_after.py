"""Before/after: the README's turbolock figures for the code at d8e8782 and for src/ as it is now,
measured side by side in one run, on both cores.

    .venv/bin/python benchmarks/before_after.py [--quick] [--only W[,W...]] [--repeat N]
                                                [--cores c,py] [--json PATH]
    .venv/bin/python benchmarks/before_after.py --prepare      # only build the "before" tree
    .venv/bin/python benchmarks/before_after.py --list         # the workloads

"Before" is ``git archive d8e8782`` unpacked in /tmp/tl_before with its C core built in place
(``setup.py build_ext --inplace``, TURBOLOCK_REQUIRE_EXTENSIONS=1), made once and reused while
its stamp matches. "After" is this checkout's src/ as it is when a workload starts, with the C
core the editable install built there (rebuild it, ``scripts/bootstrap.sh``, after changing ext/).
One process cannot import two packages called ``turbolock``, so each contender (before-c,
after-c, before-py, after-py) is a worker process of its own (this file, ``--worker``) with
PYTHONPATH on its tree's src/; workload bodies use the public API only (``LockClient``,
``AsyncLockClient``, ``RedlockClient``, ``AutoRenew``, leases' public attributes), since private
modules move between the two versions. The parent starts the redis-server(s) (from the after
tree's ``turbolock.redis_server``) and, for one workload at a time, starts the four workers, warms
them up one by one, then asks each for one measurement in turn, repetition by repetition, the
order changing every repetition (a balanced 4x4 Latin square: each contender in every position,
each "before" ahead of its "after" half the time); every server is flushed before every
measurement. Idle workers block on their stdin and use no CPU.

Reported per workload, figure and core: the median and min-max of before and after, and the
ratio after/before taken repetition by repetition (paired, like the other runners) with its
median and min-max. A figure is flagged when that median ratio loses more than 5%: below 0.95
for rates, above 1.05 for costs (CPU, bytes, latency). Exit status: 0 nothing flagged, 1 some
figure flagged, 2 some workload failed.

The default run takes about 10 minutes on a 2-core machine (repetitions are multiples of 4,
so the Latin square stays balanced), ``--quick`` about 70 s (and judges nothing: too few, too
short). Run it on a quiet machine: two cores shared with other work move every figure by more
than 5%. The after tree is read when each workload starts; a warning says when it changed
during the run (fingerprints are in the JSON).

Not measured: redis-py, pottery, glide and redis-benchmark rows (not turbolock's; the other
runners have them); round trips per claim (counted through a private executor); the steady-state
renewer CPU as the renewal runner measures it (its thread CPU clock needs a probe inside the
renewer, and minutes): ``renew_idle`` gives the between-rounds share and ``renew`` the round's
CPU, the two parts it adds up. ``renew`` relies on two behaviours both versions share (taking an
auto-renewed lock wakes the renewer; it then sleeps 50 ms) and fails loudly if the round is sent
before that wake-up; ``renewals_from_send`` assumes nothing.

A worker alone (PYTHONPATH chooses the tree) prints one JSON measurement:
    PYTHONPATH=/tmp/tl_before/src .venv/bin/python benchmarks/before_after.py \\
        --worker pairs --core c --url redis://127.0.0.1:PORT/0 [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import multiprocessing
import os
import platform
import queue
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
AFTER_SRC = os.path.join(REPO, "src")
BEFORE_COMMIT = "d8e8782"
BEFORE_DIR = os.path.join(tempfile.gettempdir(), "tl_before")
STAMP = ".before_after_stamp"
PYCACHE = os.path.join(tempfile.gettempdir(), "tl_before_after_pycache")
"""Both sides' bytecode goes here (PYTHONPYCACHEPREFIX): nothing is written into either tree."""

# The shared workload of benchmarks/workload.py, copied so that workers import nothing but turbolock.
KEY_PREFIX = "bench:"
TTL_SECONDS = 60.0
CHUNK_SIZE = 1000

CLAIM_WORKERS = 8
CLAIM_SHARDS = 10_000
CLAIM_K = 100

ROUND_POLL = 0.001
"""How often the renewal workload looks whether its round has ended (seconds)."""
ROUND_WAIT = 120.0

READY_TIMEOUT = 120.0
WARM_TIMEOUT = 600.0
RUN_TIMEOUT = 900.0

CONTENDERS = (("before", "c"), ("after", "c"), ("before", "py"), ("after", "py"))
LATIN = ((0, 1, 2, 3), (3, 2, 1, 0), (1, 0, 3, 2), (2, 3, 0, 1))
"""Orders of the four contenders, one per repetition in turn."""
LOSS = 0.05


class BenchError(RuntimeError):
    """A contender did not do what it was asked (a lock not taken, a release refused...)."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def names(kind: str, count: int) -> list[str]:
    return [f"{kind}:{i:012d}" for i in range(count)]


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float, float]:
    """``fn(*args)``, its wall and process CPU seconds; earlier garbage is collected first."""
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    result = fn(*args)
    wall = time.perf_counter() - start
    return result, wall, time.process_time() - cpu


# -- the workloads, as run inside a worker (public API only) ------------------------------------------

Figures = dict[str, float]
Info = dict[str, Any]


def lock_client(url: str, core: str, **extra: Any) -> Any:
    from turbolock import LockClient

    client = LockClient.from_url(url, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE, **extra)
    if client.implementation != core:
        raise BenchError(f"asked for core {core!r}, got {client.implementation!r}")
    return client


def redlock_client(urls: list[str], core: str) -> Any:
    from turbolock import RedlockClient

    client = RedlockClient(urls, core=core, key_prefix=KEY_PREFIX, chunk_size=CHUNK_SIZE)
    if client.implementation != core:
        raise BenchError(f"asked for core {core!r}, got {client.implementation!r}")
    return client


class Bench:
    def __init__(self, urls: list[str], core: str, params: dict[str, Any]) -> None:
        self.urls = urls
        self.core = core
        self.params = params

    def warm(self) -> None:
        raise NotImplementedError

    def measure(self) -> tuple[Figures, Info]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Pairs(Bench):
    """compare.py's pairs: try_acquire + release in turn on one connection (Redlock: 3 masters)."""

    def __init__(self, urls: list[str], core: str, params: dict[str, Any]) -> None:
        super().__init__(urls, core, params)
        self.client = self.open()
        self.names = names("pair", params["pairs"])

    def open(self) -> Any:
        return lock_client(self.urls[0], self.core, max_connections=1)

    def run(self, pair_names: list[str]) -> None:
        acquire, release = self.client.try_acquire, self.client.release
        for name in pair_names:
            lease = acquire(name, TTL_SECONDS)
            if lease is None or not release(lease):
                raise BenchError(f"lock {name!r} was not taken and released")

    def warm(self) -> None:
        self.run(names("warm", 200))

    def measure(self) -> tuple[Figures, Info]:
        _, wall, cpu = timed(self.run, self.names)
        return {"pairs": len(self.names) / wall}, {"cpu_us_per_pair": cpu / len(self.names) * 1e6}

    def close(self) -> None:
        self.client.close()


class RedlockPairs(Pairs):
    def open(self) -> Any:
        return redlock_client(self.urls, self.core)


class Bulk(Bench):
    """compare.py's bulk: acquire_many of distinct names, then release_many of the leases."""

    def __init__(self, urls: list[str], core: str, params: dict[str, Any]) -> None:
        super().__init__(urls, core, params)
        self.client = self.open()
        self.names = names("bulk", params["locks"])

    def open(self) -> Any:
        return lock_client(self.urls[0], self.core, max_connections=1)

    def run(self, lock_names: list[str]) -> Figures:
        result, wall, cpu = timed(self.client.acquire_many, lock_names, TTL_SECONDS)
        leases = result.acquired
        if len(leases) != len(lock_names):
            raise BenchError(f"{len(lock_names) - len(leases)} of {len(lock_names)} locks not taken")
        released, release_wall, _ = timed(self.client.release_many, leases)
        if not all(released):
            raise BenchError("some releases were refused")
        return {"acquire": len(leases) / wall, "release": len(leases) / release_wall,
                "acquire_cpu": cpu / len(leases) * 10_000}

    def warm(self) -> None:
        self.run(names("warm", 2000))

    def measure(self) -> tuple[Figures, Info]:
        return self.run(self.names), {}

    def close(self) -> None:
        self.client.close()


class RedlockBulk(Bulk):
    def open(self) -> Any:
        return redlock_client(self.urls, self.core)


class Extend(Bulk):
    """extend_many over held locks (taken and released around it, untimed)."""

    def run(self, lock_names: list[str]) -> Figures:
        client = self.client
        leases = client.acquire_many(lock_names, TTL_SECONDS).acquired
        if len(leases) != len(lock_names):
            raise BenchError(f"{len(lock_names) - len(leases)} of {len(lock_names)} locks not taken")
        extended, wall, cpu = timed(client.extend_many, leases, TTL_SECONDS)
        if not all(extended):
            raise BenchError("some extends were refused")
        if not all(client.release_many(leases)):
            raise BenchError("some releases were refused")
        return {"extend": len(leases) / wall, "extend_cpu": cpu / len(leases) * 10_000}


def round_lead(count: int) -> float:
    """How long after their acquire was sent the locks of a renewal round come due: past the end
    of ``acquire_many`` and the renewer's bookkeeping (about 15 us per lock), with room to spare."""
    return max(0.4, count * 20e-6)


KICK_BEFORE_DUE = 0.03
"""The renewal round's kick comes this long before the locks are due (more than a wheel tick)."""
ASSUMED_POLL = 0.05
"""The renewer's poll interval while it holds locks (POLL_INTERVAL, the same in both versions)."""


def _renewed(lease: Any, sent_before: float) -> bool:
    if lease.acquired_at <= sent_before:
        return False
    state = lease.renewal
    return state is None or getattr(state, "renewals", 1) >= 1


class Renew(Bench):
    """One renewal round by the client's own renewer thread over ``locks`` auto-renewed leases
    that all come due together (renewal_compare's throughput row, seen from outside).

    The runner times the round from the renewer's wake-up that finds the locks due to the last
    reply settled, with a probe inside the renewer. From outside: 30 ms before the locks are due
    one more auto-renewed lock is taken (the kick), which wakes the renewer at once; it then sleeps
    one poll interval (50 ms), so it wakes again, and finds everything due, 50 ms after the kick.
    The round's send time is what the renewer writes into every renewed lease
    (``lease.acquired_at``); its end is when the main thread, looking every ms, finds every lease
    renewed. ``renewals`` is locks / (end - wake-up), the runner's figure; ``renewals_from_send``
    leaves out the wheel advance and due-list filtering before the send (no assumption about the
    wake-up at all). A send before the expected wake-up fails the measurement (the renewer's
    wake-up rules changed). CPU is the whole process's from the kick to the end."""

    def __init__(self, urls: list[str], core: str, params: dict[str, Any]) -> None:
        super().__init__(urls, core, params)
        self.client = lock_client(urls[0], core)
        self.names = names("renew", params["locks"])

    def round(self, lock_names: list[str]) -> tuple[Figures, Info]:
        from turbolock import AutoRenew

        client = self.client
        lead = round_lead(len(lock_names))
        policy = AutoRenew(renew_before=TTL_SECONDS - lead)
        gc.collect()
        leases = client.acquire_many(lock_names, TTL_SECONDS, auto_renew=policy).acquired
        if len(leases) != len(lock_names):
            raise BenchError(f"{len(lock_names) - len(leases)} of {len(lock_names)} locks not taken")
        acquired = max(lease.acquired_at for lease in leases)
        due = min(lease.acquired_at for lease in leases) + lead
        margin = due - time.monotonic()
        if margin < KICK_BEFORE_DUE + 0.01:
            raise BenchError(f"acquire_many returned {margin * 1000:.0f} ms before its locks came due: "
                             "too late to time the renewal round (raise round_lead)")
        time.sleep(margin - KICK_BEFORE_DUE)
        cpu = time.process_time()
        kick = client.try_acquire(f"kick:{lock_names[0]}", TTL_SECONDS, auto_renew=policy)
        wake = time.monotonic() + ASSUMED_POLL
        if kick is None:
            raise BenchError("the kick lock was not taken")
        time.sleep(max(0.0, wake - time.monotonic() - 0.002))
        give_up = time.monotonic() + ROUND_WAIT
        i, count = 0, len(leases)
        while True:
            while i < count and _renewed(leases[i], acquired):
                i += 1
            if i == count:
                break
            if time.monotonic() > give_up:
                raise BenchError(f"only {i} of {count} leases renewed within {ROUND_WAIT:g} s")
            time.sleep(ROUND_POLL)
        end = time.monotonic()
        cpu = time.process_time() - cpu
        sends = {lease.acquired_at for lease in leases}
        if len(sends) != 1:
            raise BenchError(f"the locks were renewed in {len(sends)} rounds, not one")
        (sent,) = sends
        lost = sum(1 for lease in leases if lease.is_lost)
        if lost:
            raise BenchError(f"{lost} of {count} renewed locks lost")
        if not all(client.release_many([*leases, kick])):
            raise BenchError("some releases were refused")
        if sent < wake - 0.002:
            raise BenchError(f"the round was sent {(wake - sent) * 1000:.1f} ms before the renewer's "
                             "expected wake-up (kick + one poll interval): its wake-up rules changed")
        return ({"renewals": count / (end - wake), "renewals_from_send": count / (end - sent),
                 "round_cpu": cpu / count * 10_000 * 1000},
                {"wake_to_send_ms": (sent - wake) * 1000, "margin_ms": margin * 1000})

    def warm(self) -> None:
        self.round(names("warm", 2000))

    def measure(self) -> tuple[Figures, Info]:
        return self.round(self.names)

    def close(self) -> None:
        self.client.close()


class RenewIdle(Bench):
    """The renewer between rounds: process CPU while ``locks`` auto-renewed locks (ttl 30 s,
    renewed 10 s before expiry) are held and none is due; the main thread sleeps. The steady
    state of the README is this plus a round's CPU every 20 s (``renew`` round_cpu)."""

    def __init__(self, urls: list[str], core: str, params: dict[str, Any]) -> None:
        super().__init__(urls, core, params)
        self.client = lock_client(urls[0], core)
        self.names = names("steady", params["locks"])

    def hold(self, lock_names: list[str], seconds: float) -> float:
        from turbolock import AutoRenew

        client = self.client
        leases = client.acquire_many(lock_names, 30.0, auto_renew=AutoRenew(renew_before=10.0)).acquired
        if len(leases) != len(lock_names):
            raise BenchError(f"{len(lock_names) - len(leases)} of {len(lock_names)} locks not taken")
        time.sleep(0.2)
        gc.collect()
        wall, cpu = time.monotonic(), time.process_time()
        time.sleep(seconds)
        share = (time.process_time() - cpu) / (time.monotonic() - wall) * 100
        if not all(client.release_many(leases)):
            raise BenchError("some releases were refused")
        return share

    def warm(self) -> None:
        self.hold(names("warm", 2000), 0.2)

    def measure(self) -> tuple[Figures, Info]:
        return {"idle_cpu": self.hold(self.names, self.params["seconds"])}, {}

    def close(self) -> None:
        self.client.close()


class Memory(Bench):
    """tracemalloc around one acquire_many with a fresh client (benchmarks/memory.py and
    renewal_contenders.retained_per_lease): bytes per held lease, and per auto-renewed lock
    beyond its lease."""

    def retained(self, lock_names: list[str], auto_renew: bool, **extra: Any) -> float:
        from turbolock import AutoRenew

        policy: Any = AutoRenew() if auto_renew else False
        client = lock_client(self.urls[0], self.core, **extra)
        try:
            warm = client.acquire_many([f"warm:{i}" for i in range(10)], TTL_SECONDS, auto_renew=policy)
            client.release_many(warm.acquired)
            gc.collect()
            tracemalloc.start()
            try:
                before, _ = tracemalloc.get_traced_memory()
                result = client.acquire_many(lock_names, TTL_SECONDS, auto_renew=policy)
                gc.collect()
                after, _ = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            held = len(result.acquired)
            client.release_many(result.acquired)
        finally:
            client.close()
        if held != len(lock_names):
            raise BenchError(f"only {held} of {len(lock_names)} locks were taken")
        return (after - before) / held

    def warm(self) -> None:
        self.retained(names("warm", 100), False)

    def measure(self) -> tuple[Figures, Info]:
        lease = self.retained(names("bulk", self.params["locks"]), False, max_connections=1)
        renew_names = names("memory", self.params["renewed"])
        plain = self.retained(renew_names, False)
        renewed = self.retained(renew_names, True)
        return {"lease_bytes": lease, "renew_bytes": renewed - plain}, {"lease_bytes_at_renewed_count": plain}

    def close(self) -> None:
        pass


async def async_rate(pair: Callable[[str], Any], tasks: int, seconds: float,
                     keys_per_task: int) -> tuple[float, float]:
    """asyncio_compare.measure: pairs/s and client CPU us per pair of ``tasks`` tasks for ``seconds``."""
    loop = asyncio.get_running_loop()
    task_names = [[f"apair:{task:03d}:{i:06d}" for i in range(keys_per_task)] for task in range(tasks)]
    stop_at = 0.0
    done = [0] * tasks

    async def worker(task: int) -> None:
        mine = task_names[task]
        count = 0
        while loop.time() < stop_at:
            for name in mine:
                await pair(name)
                count += 1
                if count % 16 == 0 and loop.time() >= stop_at:
                    break
        done[task] = count

    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    stop_at = loop.time() + seconds
    await asyncio.gather(*(worker(task) for task in range(tasks)))
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    pairs = sum(done)
    return pairs / wall, cpu / pairs * 1e6


class AsyncPairs(Bench):
    """asyncio_compare's: ``tasks`` tasks doing try_acquire + release on distinct keys."""

    def __init__(self, urls: list[str], core: str, params: dict[str, Any]) -> None:
        super().__init__(urls, core, params)
        from turbolock.asyncio import AsyncLockClient

        self.loop = asyncio.new_event_loop()

        async def open_client() -> Any:
            return AsyncLockClient.from_url(urls[0], core=core, key_prefix=KEY_PREFIX)

        self.client = self.loop.run_until_complete(open_client())
        if self.client.implementation != core:
            raise BenchError(f"asked for core {core!r}, got {self.client.implementation!r}")

    def pair(self) -> Callable[[str], Any]:
        acquire, release = self.client.try_acquire, self.client.release

        async def pair(name: str) -> None:
            lease = await acquire(name, TTL_SECONDS)
            if lease is None or not await release(lease):
                raise BenchError(f"lock {name!r} was not taken and released")

        return pair

    def warm(self) -> None:
        self.loop.run_until_complete(async_rate(self.pair(), self.params["tasks"], 0.2, 8))

    def measure(self) -> tuple[Figures, Info]:
        p = self.params
        rate, cpu_us = self.loop.run_until_complete(
            async_rate(self.pair(), p["tasks"], p["seconds"], p["keys_per_task"]))
        return {"pairs": rate, "cpu": cpu_us}, {}

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


class AsyncLockPairs(AsyncPairs):
    """The same through ``AsyncLock`` objects: ``async with client.lock(name, ttl, blocking=False)``."""

    def pair(self) -> Callable[[str], Any]:
        client = self.client

        async def pair(name: str) -> None:
            async with client.lock(name, TTL_SECONDS, blocking=False):
                pass

        return pair


def _claim_child(index: int, url: str, core: str, barrier: Any, commands: Any, results: Any) -> None:
    """One process of a claim pool: waits for a command, runs that many rounds in lockstep."""
    parent = os.getppid()
    client = None
    try:
        client = lock_client(url, core, max_connections=1)
        shard_names = [f"shard:{i:05d}" for i in range(CLAIM_SHARDS)]
        number = {name: i for i, name in enumerate(shard_names)}
        while True:
            try:
                command = commands.get(timeout=2.0)
            except queue.Empty:  # is the worker still there?
                if os.getppid() != parent:
                    return
                continue
            if command is None:
                return
            if command == "warm":
                warm = client.acquire_many([f"warm:{index}:{i}" for i in range(20)], TTL_SECONDS, limit=5)
                client.release_many(warm.acquired)
                results.put((index, None, []))
                continue
            records = []
            for round_ in range(command):
                barrier.wait()
                cpu = time.process_time()
                started = time.monotonic()
                leases = client.acquire_many(shard_names, TTL_SECONDS, limit=CLAIM_K).acquired
                finished = time.monotonic()
                cpu = time.process_time() - cpu
                barrier.wait()  # every worker holds its shards: the next round finds them taken
                if not all(client.release_many(leases)):
                    raise BenchError("a release was refused")
                records.append((round_, started, finished, [number[lease.name] for lease in leases], cpu))
            results.put((index, None, records))
    except BaseException as exc:
        barrier.abort()
        results.put((index, f"{type(exc).__name__}: {exc}", []))
    finally:
        if client is not None:
            client.close()


class Claim(Bench):
    """claim_compare's: 8 processes each claim k=100 free shards of 10,000 at once
    (``acquire_many(shards, ttl, limit=100)``), hold them until all have claimed, release them;
    ``rounds`` rounds per measurement. The pool lives as long as this worker."""

    def __init__(self, urls: list[str], core: str, params: dict[str, Any]) -> None:
        super().__init__(urls, core, params)
        ctx = multiprocessing.get_context("fork")
        self.barrier = ctx.Barrier(CLAIM_WORKERS)
        self.results = ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(CLAIM_WORKERS)]
        self.processes = [ctx.Process(target=_claim_child, daemon=True,
                                      args=(i, urls[0], core, self.barrier, self.commands[i], self.results))
                          for i in range(CLAIM_WORKERS)]
        for process in self.processes:
            process.start()

    def run(self, command: Any) -> list[list[Any]]:
        for commands in self.commands:
            commands.put(command)
        per_worker: dict[int, list[Any]] = {}
        for _ in self.processes:
            index, error, records = self.results.get(timeout=RUN_TIMEOUT)
            if error is not None:
                raise BenchError(f"claim process {index} failed: {error}")
            per_worker[index] = records
        return [per_worker[i] for i in range(CLAIM_WORKERS)]

    def warm(self) -> None:
        self.run("warm")

    def measure(self) -> tuple[Figures, Info]:
        per_worker = self.run(self.params["rounds"])
        rounds: dict[int, list[Any]] = {}
        for records in per_worker:
            for record in records:
                rounds.setdefault(record[0], []).append(record)
        spans = 0.0
        for claims in rounds.values():
            counts = [len(c[3]) for c in claims]
            if counts != [CLAIM_K] * CLAIM_WORKERS:
                raise BenchError(f"workers claimed {counts} shards, not {CLAIM_K} each")
            every = [shard for c in claims for shard in c[3]]
            if len(set(every)) != len(every):
                raise BenchError("a shard went to two workers in one round")
            spans += max(c[2] for c in claims) - min(c[1] for c in claims)
        calls = [c for claims in rounds.values() for c in claims]
        shards = sum(len(c[3]) for c in calls)
        return ({"shards": shards / spans,
                 "latency": statistics.median(c[2] - c[1] for c in calls) * 1000,
                 "cpu": statistics.median(c[4] for c in calls) * 1000}, {})

    def close(self) -> None:
        for commands in self.commands:
            commands.put(None)
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()


# -- what is measured, and how it is shown ----------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    higher_is_better: bool = True
    fmt: str = "{:,.0f}"


@dataclass(frozen=True)
class Spec:
    name: str
    title: str
    bench: type[Bench]
    figures: tuple[Figure, ...]
    params: dict[str, Any]
    quick: dict[str, Any]
    repeats: int
    quick_repeats: int
    masters: int = 1


SPECS = (
    Spec("pairs", "acquire+release pairs, sequential, one connection (README single-server row 1-2)", Pairs,
         (Figure("pairs", "pairs", "pairs/s"),),
         {"pairs": 5000}, {"pairs": 1000}, 16, 3),
    Spec("bulk", "bulk acquire then bulk release of distinct locks (README single-server rows 4-7)", Bulk,
         (Figure("acquire", "acquire_many", "locks/s"),
          Figure("release", "release_many", "locks/s"),
          Figure("acquire_cpu", "CPU per 10k acquired", "s", False, "{:.4f}")),
         {"locks": 100_000}, {"locks": 20_000}, 16, 3),
    Spec("extend", "extend_many over held locks", Extend,
         (Figure("extend", "extend_many", "locks/s"),
          Figure("extend_cpu", "CPU per 10k extended", "s", False, "{:.4f}")),
         {"locks": 100_000}, {"locks": 20_000}, 12, 3),
    Spec("renew", "one auto-renewal round over held locks, by the client's renewer (README renewal row 1-2)",
         Renew,
         (Figure("renewals", "renewal round", "renewals/s"),
          Figure("renewals_from_send", "renewal round from its send", "renewals/s"),
          Figure("round_cpu", "CPU per 10k renewals", "ms", False, "{:.1f}")),
         {"locks": 100_000}, {"locks": 20_000}, 8, 3),
    Spec("renew_idle", "renewer between rounds, locks held and none due (part of README renewal row 3)",
         RenewIdle,
         (Figure("idle_cpu", "CPU, main thread asleep", "% core", False, "{:.3f}"),),
         {"locks": 100_000, "seconds": 2.0}, {"locks": 20_000, "seconds": 0.5}, 4, 2),
    Spec("memory", "client memory, tracemalloc (README single-server row 9, renewal row 4)", Memory,
         (Figure("lease_bytes", "per held lease", "bytes", False),
          Figure("renew_bytes", "per renewed lock beyond lease", "bytes", False)),
         {"locks": 100_000, "renewed": 50_000}, {"locks": 20_000, "renewed": 10_000}, 2, 1),
    Spec("async_pairs", "asyncio: 64 tasks doing acquire+release pairs on distinct keys (README asyncio)",
         AsyncPairs,
         (Figure("pairs", "pairs", "pairs/s"),
          Figure("cpu", "CPU per pair", "us", False, "{:.1f}")),
         {"tasks": 64, "seconds": 1.5, "keys_per_task": 500},
         {"tasks": 64, "seconds": 0.5, "keys_per_task": 200}, 8, 3),
    Spec("async_lock", "asyncio: the same through AsyncLock objects (README asyncio row 3)", AsyncLockPairs,
         (Figure("pairs", "pairs", "pairs/s"),
          Figure("cpu", "CPU per pair", "us", False, "{:.1f}")),
         {"tasks": 64, "seconds": 1.5, "keys_per_task": 500},
         {"tasks": 64, "seconds": 0.5, "keys_per_task": 200}, 8, 3),
    Spec("redlock_pairs", "Redlock acquire+release pairs over 3 masters, sequential (README Redlock 1-2)",
         RedlockPairs,
         (Figure("pairs", "pairs", "pairs/s"),),
         {"pairs": 2000}, {"pairs": 500}, 12, 3, masters=3),
    Spec("redlock_bulk", "Redlock bulk acquire then release over 3 masters (README Redlock 3-4)",
         RedlockBulk,
         (Figure("acquire", "acquire_many", "locks/s"),
          Figure("release", "release_many", "locks/s"),
          Figure("acquire_cpu", "CPU per 10k acquired", "s", False, "{:.4f}")),
         {"locks": 100_000}, {"locks": 20_000}, 12, 3, masters=3),
    Spec("claim", f"claim: {CLAIM_WORKERS} processes each take k={CLAIM_K} of {CLAIM_SHARDS:,} shards "
                  "at once (README claiming)", Claim,
         (Figure("shards", "acquire_many(limit=k)", "shards/s"),
          Figure("latency", "one claim call, median", "ms", False, "{:.2f}"),
          Figure("cpu", "CPU per claim call, median", "ms", False, "{:.2f}")),
         {"rounds": 50}, {"rounds": 10}, 12, 3),
)
BY_NAME = {spec.name: spec for spec in SPECS}


# -- the worker process ---------------------------------------------------------------------------


def loaded_cores() -> dict[str, str]:
    """turbolock's core modules loaded in this process and their files (wherever they live)."""
    return {name: str(getattr(module, "__file__", "") or "") for name, module in list(sys.modules.items())
            if name.startswith("turbolock.") and "core" in name.rsplit(".", 1)[-1]}


def worker_main(args: argparse.Namespace) -> int:
    # The protocol's channel is the real stdout; anything else printed goes to stderr.
    channel: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def emit(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    spec = BY_NAME[args.worker]
    params = json.loads(args.params) if args.params else dict(spec.quick if args.quick else spec.params)
    urls: list[str] = args.url or []
    try:
        import turbolock

        if len(urls) < spec.masters:
            raise BenchError(f"{spec.name} needs {spec.masters} server URLs, got {len(urls)}")
        probe = lock_client(urls[0], args.core)  # the core asked for, loaded (whatever the workload)
        probe.close()
        bench = spec.bench(urls, args.core, params)
        if args.serve:
            emit({"ready": True, "turbolock": turbolock.__file__, "cores": loaded_cores(),
                  "python": platform.python_version(), "pid": os.getpid()})
    except BaseException:
        emit({"error": traceback.format_exc()})
        return 1
    try:
        if not args.serve:
            bench.warm()
            figures, info = bench.measure()
            emit({"workload": spec.name, "core": args.core, "figures": figures, "info": info,
                  "params": params, "turbolock": turbolock.__file__, "cores": loaded_cores()})
            return 0
        for line in sys.stdin:
            command = line.strip()
            if command == "quit":
                break
            try:
                if command == "warm":
                    bench.warm()
                    emit({"ok": True})
                elif command == "run":
                    figures, info = bench.measure()
                    emit({"figures": figures, "info": info})
                else:
                    emit({"error": f"unknown command {command!r}"})
            except BaseException:
                emit({"error": traceback.format_exc()})
                return 1
        return 0
    finally:
        bench.close()


# -- the parent: trees, servers, interleaving ---------------------------------------------------------


def git(*argv: str) -> str:
    done = subprocess.run(["git", "-C", REPO, *argv], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def compiled_cores(src: str) -> list[str]:
    found = []
    for root, _, files in os.walk(os.path.join(src, "turbolock")):
        found += [os.path.join(root, f) for f in files if f.startswith("_core_c") and f.endswith(".so")]
    return sorted(found)


def prepare_before(directory: str, commit: str, force: bool = False) -> str:
    """Unpack ``commit`` into ``directory`` and build its C core in place, unless already done."""
    sha = git("rev-parse", f"{commit}^{{commit}}")
    stamp = os.path.join(directory, STAMP)
    src = os.path.join(directory, "src")
    if not force and os.path.exists(stamp) and compiled_cores(src):
        with open(stamp) as f:
            if f.read().strip() == sha:
                return sha
    if os.path.exists(directory):
        if os.path.exists(stamp):
            shutil.rmtree(directory)
        else:
            head = subprocess.run(["git", "-C", directory, "rev-parse", "HEAD"], capture_output=True,
                                  text=True, check=False).stdout.strip()
            if head != sha or not os.path.exists(os.path.join(directory, "setup.py")):
                raise SystemExit(f"{directory} exists and is neither this harness's nor a checkout of "
                                 f"{sha[:12]}: remove it or pass --before-dir")
            progress(f"before: using the checkout of {sha[:12]} in {directory}")
    if not os.path.exists(directory):
        progress(f"before: unpacking {sha[:12]} into {directory}")
        os.makedirs(directory)
        archive = subprocess.Popen(["git", "-C", REPO, "archive", sha], stdout=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-C", directory], stdin=archive.stdout, check=False)
        assert archive.stdout is not None
        archive.stdout.close()
        if archive.wait() != 0 or untar.returncode != 0:
            raise SystemExit(f"before: git archive {sha[:12]} | tar -x failed")
    progress(f"before: building its C core (setup.py build_ext --inplace; log in {directory}/build.log)")
    env = {**os.environ, "TURBOLOCK_REQUIRE_EXTENSIONS": "1"}
    env.pop("TURBOLOCK_NO_EXTENSIONS", None)
    with open(os.path.join(directory, "build.log"), "w") as log:
        built = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=directory, env=env,
                               stdout=log, stderr=subprocess.STDOUT, check=False)
    if built.returncode != 0 or not compiled_cores(src):
        with open(os.path.join(directory, "build.log")) as log:
            tail = log.read()[-2000:]
        raise SystemExit(f"before: the C core did not build:\n{tail}")
    probe = "import turbolock; print(turbolock.LockClient(core='c').implementation, turbolock.__file__)"
    check = subprocess.run([sys.executable, "-c", probe], env=worker_env(src, "c"), cwd=directory,
                           capture_output=True, text=True, check=False)
    if check.returncode != 0 or not check.stdout.startswith("c ") or src not in check.stdout:
        raise SystemExit("before: the built tree does not import with its C core:\n"
                         f"{check.stdout}{check.stderr}")
    with open(stamp, "w") as f:
        f.write(sha + "\n")
    progress(f"before: ready ({compiled_cores(src)[0]})")
    return sha


def tree_fingerprint(src: str) -> str:
    """A hash of every .py and compiled file under src/turbolock (to notice a tree changing mid-run)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(os.path.join(src, "turbolock")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".py", ".so", ".pyx", ".pxd")):
                path = os.path.join(root, f)
                digest.update(path[len(src):].encode())
                with open(path, "rb") as data:
                    digest.update(hashlib.sha256(data.read()).digest())
    return digest.hexdigest()[:16]


def after_core_warning() -> str | None:
    """Whether the after tree's compiled core is older than its ext/ sources (a stale build)."""
    built = compiled_cores(AFTER_SRC)
    if not built:
        return "the after tree has no compiled core under src/turbolock (run scripts/bootstrap.sh)"
    ext = os.path.join(REPO, "ext")
    listed = os.listdir(ext) if os.path.isdir(ext) else []
    sources = [os.path.join(ext, f) for f in listed if f.endswith((".pyx", ".pxd"))]
    newest = max((os.path.getmtime(s) for s in sources), default=0.0)
    oldest = min(os.path.getmtime(b) for b in built)
    if newest > oldest:
        return (f"the after tree's compiled core ({', '.join(built)}) is older than ext/: "
                "rebuild it (scripts/bootstrap.sh or pip install -e .) or after-c measures stale code")
    return None


def worker_env(src: str, core: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = src
    env["PYTHONPYCACHEPREFIX"] = PYCACHE
    env.pop("TURBOLOCK_NO_EXTENSIONS", None)
    if core == "c":
        env["TURBOLOCK_REQUIRE_EXTENSIONS"] = "1"
    else:
        env.pop("TURBOLOCK_REQUIRE_EXTENSIONS", None)
    return env


class WorkerError(RuntimeError):
    pass


class Worker:
    """One contender's worker process and its line protocol."""

    def __init__(self, spec: Spec, side: str, core: str, src: str, urls: list[str],
                 params: dict[str, Any]) -> None:
        self.label = f"{side}-{core}"
        self.side, self.core, self.src = side, core, src
        argv = [sys.executable, os.path.abspath(__file__), "--worker", spec.name, "--core", core, "--serve",
                "--params", json.dumps(params)]
        for url in urls:
            argv += ["--url", url]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=worker_env(src, core), cwd=tempfile.gettempdir())
        self.ready: dict[str, Any] = {}

    def read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not readable:
            raise WorkerError(f"{self.label}: no answer within {timeout:g} s")
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError(f"{self.label}: the worker exited ({self.proc.wait()}) without answering")
        message: dict[str, Any] = json.loads(line)
        if "error" in message:
            raise WorkerError(f"{self.label}: {message['error'].rstrip()}")
        return message

    def wait_ready(self) -> None:
        self.ready = self.read(READY_TIMEOUT)
        where = str(self.ready.get("turbolock", ""))
        if not where.startswith(self.src + os.sep):
            raise WorkerError(f"{self.label}: imported turbolock from {where}, not from {self.src}")
        if self.core == "c":
            compiled = [f for f in self.ready["cores"].values() if f.endswith(".so")]
            if not compiled or not all(f.startswith(self.src + os.sep) for f in compiled):
                raise WorkerError(f"{self.label}: the compiled core came from {compiled or 'nowhere'}")

    def request(self, command: str, timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerError(f"{self.label}: the worker is gone ({self.proc.poll()})") from None
        return self.read(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                progress(f"{self.label}: killing worker pid {self.proc.pid}")
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()


@dataclass
class Outcome:
    spec: Spec
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """figure key -> contender label -> one value per repetition."""
    info: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    after_fingerprint: str = ""


class Servers:
    def __init__(self, count: int) -> None:
        import redis

        from turbolock.redis_server import RedisServer

        self.servers: list[Any] = []
        try:
            for _ in range(count):
                server = RedisServer().start()
                self.servers.append(server)
                progress(f"redis-server pid {server.process.pid} on port {server.port}")
        except BaseException:
            self.stop()
            raise
        self.urls = [server.url for server in self.servers]
        self.admins = [redis.Redis.from_url(url) for url in self.urls]
        self.version = str(self.admins[0].info("server")["redis_version"])

    def flush(self, count: int) -> None:
        for admin in self.admins[:count]:
            admin.flushall()

    def stop(self) -> None:
        for admin in getattr(self, "admins", []):
            admin.close()
        for server in self.servers:
            pid = server.process.pid if server.process is not None else None
            server.stop()
            progress(f"redis-server pid {pid} stopped")
        self.servers = []


def orders(count: int, repeat: int) -> tuple[int, ...]:
    if count == 4:
        return LATIN[repeat % 4]
    base = tuple(range(count))
    return base if repeat % 2 == 0 else base[::-1]


def show(spec: Spec, figures: dict[str, float]) -> str:
    parts = []
    for figure in spec.figures:
        if figure.key in figures:
            parts.append(f"{figure.label} {figure.fmt.format(figures[figure.key])} {figure.unit}")
    return ", ".join(parts)


def run_workload(spec: Spec, servers: Servers, sources: dict[str, str], cores: list[str], quick: bool,
                 repeats: int) -> Outcome:
    outcome = Outcome(spec, {figure.key: {} for figure in spec.figures})
    params = spec.quick if quick else spec.params
    contenders = [(side, core) for side, core in CONTENDERS if core in cores]
    urls = servers.urls[:spec.masters]
    started = time.monotonic()
    progress(f"== {spec.name}: {spec.title}; {params}, {repeats} repetitions")
    workers: list[Worker] = []
    try:
        outcome.after_fingerprint = tree_fingerprint(sources["after"])
        workers = [Worker(spec, side, core, sources[side], urls, params) for side, core in contenders]
        for worker in workers:
            worker.wait_ready()
            outcome.workers[worker.label] = worker.ready
        for worker in workers:  # one at a time: their warm-ups use the same names
            servers.flush(spec.masters)
            worker.request("warm", WARM_TIMEOUT)
        for repeat in range(repeats):
            for index in orders(len(workers), repeat):
                worker = workers[index]
                servers.flush(spec.masters)
                answer = worker.request("run", RUN_TIMEOUT)
                for figure in spec.figures:
                    outcome.samples[figure.key].setdefault(worker.label, []).append(
                        float(answer["figures"][figure.key]))
                outcome.info.setdefault(worker.label, []).append(answer.get("info", {}))
                progress(f"[{repeat + 1}/{repeats}] {spec.name:13s} {worker.label:9s} "
                         f"{show(spec, answer['figures'])}")
    except (WorkerError, BenchError, OSError, KeyError, ValueError) as exc:
        outcome.error = str(exc)
        progress(f"{spec.name}: FAILED: {exc}")
    finally:
        for worker in workers:
            worker.stop()
        servers.flush(spec.masters)
    outcome.seconds = time.monotonic() - started
    return outcome


# -- statistics and the report ----------------------------------------------------------------------


def summary(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return {"median": statistics.median(values), "low": min(values), "high": max(values), "q1": q1, "q3": q3,
            "count": len(values)}


@dataclass
class Comparison:
    spec: Spec
    figure: Figure
    core: str
    before: dict[str, float] | None
    after: dict[str, float] | None
    ratio: dict[str, float] | None
    """after/before, repetition by repetition."""
    ratio_of_medians: float | None

    @property
    def flagged(self) -> bool:
        if self.ratio is None:
            return False
        r = self.ratio["median"]
        return r < 1 - LOSS if self.figure.higher_is_better else r > 1 + LOSS


def compare(outcomes: list[Outcome], cores: list[str]) -> list[Comparison]:
    rows = []
    for outcome in outcomes:
        for figure in outcome.spec.figures:
            for core in cores:
                by = outcome.samples.get(figure.key, {})
                before, after = by.get(f"before-{core}", []), by.get(f"after-{core}", [])
                n = min(len(before), len(after))
                ratio = summary([a / b for a, b in zip(after[:n], before[:n], strict=True) if b])
                b_sum, a_sum = summary(before), summary(after)
                of_medians = None
                if a_sum and b_sum and b_sum["median"]:
                    of_medians = a_sum["median"] / b_sum["median"]
                rows.append(Comparison(outcome.spec, figure, core, b_sum, a_sum, ratio, of_medians))
    return rows


_HEADER = ("figure [unit]", "core", "before", "min-max", "after", "min-max", "after/before", "min-max",
           "of medians", "")
_WIDTHS = (46, 4, 9, 17, 9, 17, 12, 9, 10, 4)


def _line(cells: Sequence[str]) -> str:
    first, *rest = cells
    parts = [first.ljust(_WIDTHS[0])]
    parts += [cell.rjust(width) if i not in (0, 8) else cell.ljust(width)
              for i, (cell, width) in enumerate(zip(rest, _WIDTHS[1:], strict=True))]
    return "  ".join(parts).rstrip()


def render(outcomes: list[Outcome], rows: list[Comparison]) -> str:
    out = [_line(_HEADER), "-" * (sum(_WIDTHS) + 2 * (len(_WIDTHS) - 1))]
    for outcome in outcomes:
        spec = outcome.spec
        out.append(f"{spec.name}: {spec.title}" + (f"  [FAILED: {outcome.error.splitlines()[-1]}]"
                                                     if outcome.error else ""))
        for row in rows:
            if row.spec is not spec:
                continue
            fmt = row.figure.fmt
            lower = "" if row.figure.higher_is_better else ", lower"
            cells = [f"  {row.figure.label} [{row.figure.unit}{lower}]"[:_WIDTHS[0]], row.core]
            for s in (row.before, row.after):
                cells += ["n/a", ""] if s is None else [fmt.format(s["median"]),
                                                        f"{fmt.format(s['low'])}-{fmt.format(s['high'])}"]
            if row.ratio is None:
                cells += ["n/a", "", "", ""]
            else:
                r = row.ratio
                of_medians = "" if row.ratio_of_medians is None else f"{row.ratio_of_medians:.3f}x"
                cells += [f"{r['median']:.3f}x", f"{r['low']:.2f}-{r['high']:.2f}", of_medians,
                          "LOSS" if row.flagged else ""]
            out.append(_line(cells))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# -- main -------------------------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/before_after.py",
                                     description="The README's turbolock figures, side by side: "
                                                 f"{BEFORE_COMMIT} against src/ as it is now, both cores.")
    parser.add_argument("--quick", action="store_true",
                        help="smaller batches, fewer repetitions (about 70 s): a smoke test only")
    parser.add_argument("--only", action="append", default=[], metavar="W[,W...]",
                        help=f"run only these workloads: {', '.join(BY_NAME)}")
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help="repetitions for every workload")
    parser.add_argument("--cores", default="c,py", help="c, py or c,py (default)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write samples and summaries here")
    parser.add_argument("--before-dir", default=BEFORE_DIR, help=f"default: {BEFORE_DIR}")
    parser.add_argument("--before-commit", default=BEFORE_COMMIT, help=f"default: {BEFORE_COMMIT}")
    parser.add_argument("--rebuild", action="store_true", help="unpack and build the before tree again")
    parser.add_argument("--prepare", action="store_true", help="only prepare the before tree")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    worker = parser.add_argument_group("worker (internal; also usable alone, PYTHONPATH picks the tree)")
    worker.add_argument("--worker", choices=list(BY_NAME), help="run one workload's measurement")
    worker.add_argument("--core", choices=("c", "py"), default="c")
    worker.add_argument("--url", action="append", help="server URL (Redlock: three)")
    worker.add_argument("--serve", action="store_true", help="answer warm/run/quit lines on stdin")
    worker.add_argument("--params", default=None, help="the workload's parameters as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    if sys.path and os.path.abspath(sys.path[0]) == HERE:
        del sys.path[0]  # benchmarks/ holds modules (stats, memory...) that must not shadow anything
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.worker:
        return worker_main(args)
    if args.list:
        for spec in SPECS:
            figures = ", ".join(f"{f.key} [{f.unit}]" for f in spec.figures)
            print(f"{spec.name:13s} {spec.title}\n{'':13s} figures: {figures}\n{'':13s} "
                  f"default {spec.params} x {spec.repeats}; quick {spec.quick} x {spec.quick_repeats}")
        return 0
    selected = [name.strip() for item in args.only for name in item.split(",") if name.strip()]
    selected = selected or list(BY_NAME)
    unknown = [name for name in selected if name not in BY_NAME]
    cores = [core.strip() for core in args.cores.split(",") if core.strip()]
    if unknown or not cores or any(core not in ("c", "py") for core in cores):
        raise SystemExit(f"unknown workload(s) {unknown} (known: {', '.join(BY_NAME)}) "
                         f"or cores {args.cores!r}")
    started = time.monotonic()
    before_dir = os.path.abspath(args.before_dir)
    before_sha = prepare_before(before_dir, args.before_commit, args.rebuild)
    if args.prepare:
        return 0
    sources = {"before": os.path.join(before_dir, "src"), "after": AFTER_SRC}
    warning = after_core_warning() if "c" in cores else None
    if warning:
        progress(f"WARNING: {warning}")
    sys.path.insert(0, AFTER_SRC)  # the parent's RedisServer comes from the after tree
    sys.pycache_prefix = PYCACHE  # and leaves no bytecode in it
    try:
        import turbolock.redis_server  # noqa: F401
    except Exception as exc:
        raise SystemExit(f"the after tree ({AFTER_SRC}) does not import ({type(exc).__name__}: {exc}); "
                         "if it is being restructured, try again later") from None
    specs = [BY_NAME[name] for name in selected]
    after_start = tree_fingerprint(AFTER_SRC)
    meta: dict[str, Any] = {
        "command": " ".join(["benchmarks/before_after.py", *(sys.argv[1:] if argv is None else argv)]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": args.quick,
        "before": {"commit": before_sha, "src": sources["before"],
                   "fingerprint": tree_fingerprint(sources["before"])},
        "after": {"head": git("rev-parse", "HEAD"), "src": AFTER_SRC, "fingerprint_at_start": after_start,
                  "changed_files": git("status", "--porcelain", "--", "src", "ext", "setup.py").splitlines(),
                  "core_warning": warning},
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    servers = Servers(max(spec.masters for spec in specs))
    outcomes: list[Outcome] = []
    try:
        meta["redis_server"] = servers.version
        for spec in specs:
            repeats = args.repeat or (spec.quick_repeats if args.quick else spec.repeats)
            outcomes.append(run_workload(spec, servers, sources, cores, args.quick, repeats))
    finally:
        servers.stop()
    meta["seconds"] = round(time.monotonic() - started, 1)
    meta["load_average_end"] = os.getloadavg()
    meta["after"]["fingerprint_at_end"] = tree_fingerprint(AFTER_SRC)
    changed = {o.spec.name for o in outcomes if o.after_fingerprint and o.after_fingerprint != after_start}
    if meta["after"]["fingerprint_at_end"] != after_start:
        changed.add("(end of run)")
    rows = compare(outcomes, cores)
    print(render(outcomes, rows), end="")
    flagged = [row for row in rows if row.flagged]
    failed = [o for o in outcomes if o.error]
    print(f"\n{meta['command']}: {meta['seconds']:.0f} s; before {before_sha[:12]}, after {AFTER_SRC} "
          f"(HEAD {meta['after']['head'][:12]} + {len(meta['after']['changed_files'])} changed paths); "
          f"load average {meta['load_average_start'][0]:.2f} -> {meta['load_average_end'][0]:.2f}, "
          f"{meta['cpus']} CPUs; redis-server {servers.version}")
    print(f"ratio: after/before per repetition (paired), median and min-max; LOSS: worse than {LOSS:.0%} "
          "(below 0.95 for rates, above 1.05 for costs marked 'lower')")
    if args.quick:
        print("--quick: a smoke test; its figures are too short and too few to judge a 5% difference")
    if changed:
        print(f"WARNING: the after tree changed during the run (workloads started after: {sorted(changed)})")
    if warning:
        print(f"WARNING: {warning}")
    for row in flagged:
        ratio = row.ratio["median"] if row.ratio else float("nan")
        print(f"LOSS: {row.spec.name} {row.figure.label} ({row.core}): {ratio:.3f}x after/before")
    for outcome in failed:
        print(f"FAILED: {outcome.spec.name}: {outcome.error}")
    if args.json:
        report = {
            "meta": meta,
            "workloads": {o.spec.name: {
                "title": o.spec.title, "params": o.spec.quick if args.quick else o.spec.params,
                "seconds": round(o.seconds, 1), "error": o.error, "workers": o.workers, "info": o.info,
                "after_fingerprint": o.after_fingerprint, "samples": o.samples,
            } for o in outcomes},
            "comparisons": [{"workload": r.spec.name, "figure": r.figure.key, "label": r.figure.label,
                             "unit": r.figure.unit, "higher_is_better": r.figure.higher_is_better,
                             "core": r.core,
                             "before": r.before, "after": r.after, "ratio": r.ratio,
                             "ratio_of_medians": r.ratio_of_medians, "flagged": r.flagged} for r in rows],
        }
        directory = os.path.dirname(os.path.abspath(args.json))
        os.makedirs(directory, exist_ok=True)
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
        progress(f"wrote {args.json}")
    return 2 if failed else 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
