"""Cancelling a task inside an AsyncRedlockClient call, at every await point in turn: no lock is
ever left behind on any master, and the client stays usable."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import redis
from _async_redlock_workers import values
from async_helpers import Runner

from _raw import Raws
from turbolock import RedlockStatus
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

MakeRedlock = Callable[..., AsyncRedlockClient]

MAX_ITERATIONS = 400
CLEANUP_LIMIT = 3.0  # far below the 30 s ttl: a lock left behind is released, not expired


async def _cancel_after(coro: Any, iterations: int) -> tuple[bool, Any]:
    """Run ``coro`` as a task, cancel it after ``iterations`` loop iterations; (finished, result)."""
    task = asyncio.ensure_future(coro)
    for _ in range(iterations):
        await asyncio.sleep(0)
    task.cancel()
    try:
        return True, await task
    except asyncio.CancelledError:
        return False, None


async def _gone(connections: list[redis.Redis], key: str) -> bool:
    deadline = time.monotonic() + CLEANUP_LIMIT
    while values(connections, key) != [None] * len(connections):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.001)
    return True


def test_a_cancelled_acquire_never_leaves_a_lock(arun: Runner, three: list[RedisServer],
                                                 make_async_redlock: MakeRedlock, raws: Raws,
                                                 key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            await client.query("warm-up")
            outcomes = set()
            finished_in_a_row = 0
            for k in range(MAX_ITERATIONS):
                if finished_in_a_row == 3:
                    break
                name = f"c:{k}"
                finished, lease = await _cancel_after(client.try_acquire(name, 30), k)
                outcomes.add(finished)
                finished_in_a_row = finished_in_a_row + 1 if finished else 0
                if finished:
                    assert lease is not None and await client.release(lease)
                assert await _gone(connections, key_prefix + name), f"left behind when cancelled after {k}"
            assert outcomes == {True, False}, "the range must cover cancels before and after completion"
            # The client still works, and the cancels left it nothing to clean up for long.
            lease = await client.try_acquire("after", 30)
            assert lease is not None and lease.instances.acquired == 3 and await client.release(lease)

    arun(body)


def test_wait_for_with_tiny_timeouts(arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock,
                                     raws: Raws, key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            await client.query("warm-up")
            for round_no in range(2):
                for timeout in [0, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3]:
                    name = f"w:{round_no}:{timeout}"
                    try:
                        result = await asyncio.wait_for(client.acquire(name, 30), timeout)
                    except asyncio.TimeoutError:
                        pass
                    else:
                        assert result.lease is not None and await client.release(result.lease)
                    assert await _gone(connections, key_prefix + name), f"left behind after {timeout}"

    arun(body)


def test_a_cancelled_bulk_acquire_leaves_nothing(arun_asyncio: Runner, three: list[RedisServer],
                                                 make_async_redlock: MakeRedlock, raws: Raws,
                                                 key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three, chunk_size=20) as client:
            await client.query("warm-up")
            for k in range(0, 60, 3):
                names = [f"b:{k}:{i}" for i in range(100)]
                finished, result = await _cancel_after(client.acquire_many(names, 30), k)
                if finished:
                    assert await client.release_many(result.acquired) == [True] * len(result.acquired)
                deadline = time.monotonic() + CLEANUP_LIMIT
                while any(raw.exists(*(key_prefix + name for name in names)) for raw in connections):
                    assert time.monotonic() < deadline, f"left behind when cancelled after {k}"
                    await asyncio.sleep(0.005)

    arun_asyncio(body)


def test_cancelled_waiters_leave_nothing_and_the_holder_keeps_the_lock(
        arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as holder, \
                make_async_redlock(three, retry_delay=0.005) as client:
            lease = await holder.try_acquire("contended", 30)
            assert lease is not None
            waiters = [client.lock("contended", 30) for _ in range(12)]
            tasks = [asyncio.ensure_future(lock.acquire()) for lock in waiters]
            for i, task in enumerate(tasks):  # cancels spread over waits, sends and replies
                for _ in range(i % 5):
                    await asyncio.sleep(0.001 if i % 2 else 0)
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            assert all(task.cancelled() for task in tasks)
            assert all(lock.lease is None for lock in waiters)
            assert values(connections, key_prefix + "contended") == [lease.token] * 3
            assert await holder.release(lease) is True
            assert await _gone(connections, key_prefix + "contended")
            result = await client.acquire("contended", 30, blocking=False)
            assert result.status is RedlockStatus.ACQUIRED and result.lease is not None
            assert await client.release(result.lease)

    arun(body)


def test_a_cancelled_release_still_releases(arun: Runner, three: list[RedisServer],
                                            make_async_redlock: MakeRedlock, raws: Raws,
                                            key_prefix: str) -> None:
    """Once started, a release runs to its end, cancelled or not, with the masters' scripts
    loaded or forgotten (as after a restart: NOSCRIPT, then SCRIPT LOAD and again)."""
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            await client.query("warm-up")
            for k in range(1, 13):  # once started (k >= 1), whatever the await point
                for forgotten in (False, True):
                    name = f"r:{k}:{forgotten}"
                    lease = await client.try_acquire(name, 30)
                    assert lease is not None
                    if forgotten:
                        for raw in connections:
                            raw.script_flush()
                    else:  # a release run to its end loads the script on every master
                        warm = await client.try_acquire(name + ":warm", 30)
                        assert warm is not None and await client.release(warm)
                    finished, released = await _cancel_after(client.release(lease), k)
                    assert released is (True if finished else None)
                    assert await _gone(connections, key_prefix + name), \
                        f"{name}: kept after a cancel at {k}: {values(connections, key_prefix + name)}"

    arun(body)
