"""What the asyncio Redlock tests share: a few helpers, and the worker body of the multi-process
scenario (each worker process runs an event loop of its own).

A module of its own (not ``conftest``): test modules import it by this unique name, and worker
processes unpickle their target from it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import redis
import redis.asyncio as redis_asyncio

TTL = 2.0
"""Long enough next to the 50 ms node timeout that a loaded 2-core machine keeps validity."""


def values(raw_masters: list[redis.Redis], key: str | bytes) -> list[bytes | None]:
    """The value of ``key`` on each master (None where absent)."""
    return [connection.get(key) for connection in raw_masters]


def pttls(raw_masters: list[redis.Redis], key: str | bytes) -> list[int]:
    """The PTTL of ``key`` on each master (-2 where absent)."""
    return [int(connection.pttl(key)) for connection in raw_masters]


# -- the multi-process scenario -------------------------------------------------------------------

SPIN_LIMIT = 40.0


def contender(index: int, urls: list[str], core: str, prefix: str, names: list[str], tasks: int,
              rounds: int, locked: bool, start: Any) -> dict[str, Any]:
    """One process: ``tasks`` asyncio tasks sharing one AsyncRedlockClient, each taking one of
    ``names`` ``rounds`` times (by turns) and, inside, bumping that name's counter with GET then
    SET on the first master, so only the lock keeps updates from being lost. Half the tasks
    use ``acquire(blocking=False)`` and retry by hand, half ``async with client.lock(...)``.

    ``locked=False`` runs the same section with no lock at all: the negative control, showing
    the test's checks do catch two holders at once when nothing excludes them.
    """
    return asyncio.run(_contend(index, urls, core, prefix, names, tasks, rounds, locked, start))


async def _contend(index: int, urls: list[str], core: str, prefix: str, names: list[str], tasks: int,
                   rounds: int, locked: bool, start: Any) -> dict[str, Any]:
    from turbolock import RedlockStatus
    from turbolock.asyncio import AsyncRedlockClient

    data = redis_asyncio.Redis.from_url(urls[0])
    statuses: Counter[str] = Counter()
    intervals: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    crowded = 0
    deadline = time.monotonic() + SPIN_LIMIT

    async def section(name: str) -> None:
        nonlocal crowded
        inside_key, counter_key = f"{prefix}data:inside:{name}", f"{prefix}data:counter:{name}"
        began = time.monotonic()
        if await data.incr(inside_key) != 1:
            crowded += 1
        value = int(await data.get(counter_key) or 0)
        await asyncio.sleep(0.001)
        await data.set(counter_key, value + 1)
        await data.decr(inside_key)
        intervals[name].append((began, time.monotonic()))

    async def by_hand(task: int) -> None:
        for round_ in range(rounds):
            name = names[(task + round_) % len(names)]
            if not locked:
                await section(name)
                continue
            while True:
                if time.monotonic() > deadline:
                    raise AssertionError(f"worker {index} task {task}: stuck after {round_} rounds")
                result = await client.acquire(name, 2.0, blocking=False)
                statuses[result.status.value] += 1
                if result.lease is not None:
                    break
                await asyncio.sleep(random.uniform(0.0, 0.004))
            lease = result.lease
            assert lease is not None and result.status is RedlockStatus.ACQUIRED
            await section(name)
            lease.ensure_held()
            if not await client.release(lease):
                raise AssertionError(f"worker {index}: the lock on {name} expired inside a round")

    async def with_lock_objects(task: int) -> None:
        for round_ in range(rounds):
            name = names[(task + round_) % len(names)]
            if not locked:
                await section(name)
                continue
            async with client.lock(name, 2.0, timeout=SPIN_LIMIT) as lock:
                lock.ensure_held()
                await section(name)

    async with AsyncRedlockClient(urls, core=core, key_prefix=prefix, retry_delay=0.01) as client:
        try:
            await client.query("warm-up")  # connections open before the start line
            await asyncio.to_thread(start.wait, 30)
            await asyncio.gather(*((by_hand if task % 2 == 0 else with_lock_objects)(task)
                                   for task in range(tasks)))
            implementation = client.implementation
        finally:
            await data.aclose()
    return {"statuses": dict(statuses), "intervals": intervals, "crowded": crowded,
            "implementation": implementation}
