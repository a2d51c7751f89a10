"""What ``turbolock bench`` measures: each workload's contenders, built on one server.

Every contender of a workload does the same work on the same key names; a step returns its
figures (``metric id -> value``) for one repeat. turbolock is compared with redis-py as it is
installed here (with hiredis when hiredis is installed, and then also without it) and with the
best hand-written redis-py code for each workload.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from turbolock import LockClient

from .contenders import (
    RedisPyBatchedRelease,
    RedisPyLock,
    RedisPyPipeline,
    RedisPyScript,
    Turbolock,
    hiredis_available,
)
from .contention import RedisPyContention, TurbolockContention
from .renewal import RedisPyPipelinedRenewMany, TurbolockExtendMany, hold
from .workload import CHUNK_SIZE, names

RUN = secrets.token_hex(4)
"""In every key name: two runs on one server (two machines, or one interrupted) never collide."""


@dataclass(frozen=True)
class Sizes:
    pairs: int
    bulk: int
    renewal: int
    contention_seconds: float
    threads: int
    repeats: int


FULL = Sizes(pairs=2000, bulk=100_000, renewal=100_000, contention_seconds=1.0, threads=8, repeats=5)
QUICK = Sizes(pairs=1000, bulk=5000, renewal=5000, contention_seconds=0.3, threads=4, repeats=3)


@dataclass(frozen=True)
class Metric:
    id: str
    title: str
    unit: str


WORKLOADS = ("pairs", "bulk", "renewal", "contention")


def metrics(sizes: Sizes) -> dict[str, tuple[Metric, ...]]:
    """Each workload's figures, in the table's order."""
    return {
        "pairs": (Metric("pairs", f"acquire + release, one lock at a time ({sizes.pairs:,} pairs)",
                         "pairs/s"),),
        "bulk": (Metric("bulk-acquire", f"bulk acquire of {sizes.bulk:,} locks", "locks/s"),
                 Metric("bulk-release", f"bulk release of {sizes.bulk:,} locks", "locks/s")),
        "renewal": (Metric("renewal", f"renew {sizes.renewal:,} held locks once", "locks/s"),),
        "contention": (Metric("contention", f"one lock, {sizes.threads} threads: blocking acquire, "
                                            "0.5 ms critical section, release", "hand-offs/s"),),
    }


@dataclass
class Contender:
    workload: str
    label: str
    step: Callable[[], dict[str, float]]
    close: Callable[[], None]


def parser_variants() -> list[tuple[str, bool]]:
    """redis-py as installed here, and without hiredis too when hiredis is installed."""
    if hiredis_available():
        return [(" + hiredis", True), (" (no hiredis)", False)]
    return [(" (no hiredis)", False)]


def _pairs(url: str, core: str, sizes: Sizes) -> Iterator[Contender]:
    pair_names = names(f"pair:{RUN}", sizes.pairs)
    turbolock = Turbolock(url, core)
    yield Contender("pairs", f"turbolock ({core} core)",
                    lambda: {"pairs": turbolock.pairs(pair_names).rate}, turbolock.close)
    for suffix, hiredis in parser_variants():
        lock = RedisPyLock(url, hiredis)
        yield Contender("pairs", "redis-py Lock" + suffix,
                        lambda lock=lock: {"pairs": lock.pairs(pair_names).rate}, lock.close)  # type: ignore[misc]
    script = RedisPyScript(url, hiredis_available())
    yield Contender("pairs", "redis-py SET NX + Lua release (hand-written)",
                    lambda: {"pairs": script.pairs(pair_names).rate}, script.close)


def _bulk_figures(contender: Any, bulk_names: list[str]) -> dict[str, float]:
    acquired, released = contender.bulk(bulk_names)
    return {"bulk-acquire": acquired.rate, "bulk-release": released.rate}


def _bulk(url: str, core: str, sizes: Sizes) -> Iterator[Contender]:
    bulk_names = names(f"bulk:{RUN}", sizes.bulk)
    turbolock = Turbolock(url, core)
    yield Contender("bulk", f"turbolock ({core} core)", lambda: _bulk_figures(turbolock, bulk_names),
                    turbolock.close)
    for suffix, hiredis in parser_variants():
        pipeline = RedisPyPipeline(url, hiredis)
        yield Contender("bulk", f"redis-py pipeline, {CHUNK_SIZE} per execute" + suffix,
                        lambda pipeline=pipeline: _bulk_figures(pipeline, bulk_names),  # type: ignore[misc]
                        pipeline.close)
    batched = RedisPyBatchedRelease(url, hiredis_available())
    yield Contender("bulk", "redis-py pipeline; release: one script per 1000 locks (hand-written)",
                    lambda: _bulk_figures(batched, bulk_names), batched.close)


@contextmanager
def _held(client: LockClient, count: int) -> Iterator[Any]:
    held = hold(client, names(f"renew:{RUN}", count))
    try:
        yield held
    finally:
        client.release_many(held.leases)


def _renewal(url: str, core: str, sizes: Sizes) -> Iterator[Contender]:
    turbolock = TurbolockExtendMany(url, core)

    def measured(contender: Any) -> Callable[[], dict[str, float]]:
        def step() -> dict[str, float]:
            # Leases are renewed by the client that made them: turbolock's own client takes them.
            with _held(turbolock.client, sizes.renewal) as held:
                return {"renewal": contender.renew(held).rate}
        return step

    yield Contender("renewal", f"turbolock extend_many ({core} core)", measured(turbolock), turbolock.close)
    for suffix, hiredis in parser_variants():
        script = RedisPyPipelinedRenewMany(url, hiredis)
        yield Contender("renewal", "redis-py, one script per 1000 locks, pipelined (hand-written)" + suffix,
                        measured(script), script.close)


def _contention(url: str, core: str, sizes: Sizes) -> Iterator[Contender]:
    seconds = sizes.contention_seconds
    name = f"contention:{RUN}"  # named after the run, as every bench key: two runs never share it
    turbolock = TurbolockContention(url, core, sizes.threads, name)
    yield Contender("contention", f"turbolock Lock, woken by the release ({core} core)",
                    lambda: {"contention": turbolock.run(seconds).rate}, turbolock.close)
    for suffix, hiredis in parser_variants():
        lock = RedisPyContention(url, sizes.threads, name, hiredis)
        yield Contender("contention", "redis-py Lock, sleep=1ms" + suffix,
                        lambda lock=lock: {"contention": lock.run(seconds).rate},  # type: ignore[misc]
                        lock.close)


BUILDERS = {"pairs": _pairs, "bulk": _bulk, "renewal": _renewal, "contention": _contention}


def contenders(url: str, core: str, sizes: Sizes, workloads: tuple[str, ...]) -> list[Contender]:
    built: list[Contender] = []
    try:
        for workload in workloads:
            built.extend(BUILDERS[workload](url, core, sizes))
    except BaseException:
        for contender in built:
            contender.close()
        raise
    return built
