"""Cancellation at every await point: no lock is ever left behind, and the connection stays usable.

A task is cancelled after 0, 1, 2... loop iterations (and by ``asyncio.wait_for`` with tiny
timeouts), so across the range the cancel lands at each await point in turn: waiting for the
connection to open, for a pending cleanup, for the reply, for the backoff sleep. Whatever the
point, once the replies are in, the server holds nothing the caller does not know about.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from typing import Any

import pytest
import redis
from async_helpers import NewClient, Runner, keys_left, settle

from _cancelling import cancel_after
from turbolock import LockInfo
from turbolock.asyncio import AsyncLockClient

# Cancels after 0, 1, 2... iterations until the call finished before the cancel three times running.
MAX_ITERATIONS = 400


def _count_cleanups(client: AsyncLockClient) -> list[bytes]:
    """Records every key handed to the maybe-held cleanup."""
    seen: list[bytes] = []
    remember = client._remember_cleanup

    def recording(key: bytes, token: bytes, expires_at: float, recheck: bool = False) -> None:
        seen.append(key)
        remember(key, token, expires_at, recheck)

    client._remember_cleanup = recording  # type: ignore[method-assign]
    return seen


def test_cancelled_try_acquire_never_leaves_a_lock(arun: Runner, new_client: NewClient,
                                                   raw: redis.Redis) -> None:
    async def body() -> None:
        orphaned = 0
        outcomes = set()
        for fresh in (True, False):
            client = new_client()
            cleanups = _count_cleanups(client)
            if not fresh:
                await client.query("warm-up")  # connected: only the reply (and cleanup) await is left
            finished_in_a_row = 0
            for k in range(MAX_ITERATIONS):
                if finished_in_a_row == 3:
                    break
                if not fresh:
                    # A maybe-held lock pending cleanup adds the cleanup await in front of the SET.
                    client._remember_cleanup(b"ghost", b"g" * 16, time.monotonic() + 30)
                name = f"c:{fresh}:{k}"
                finished, lease = await cancel_after(client.try_acquire(name, 30), k)
                outcomes.add(finished)
                finished_in_a_row = finished_in_a_row + 1 if finished else 0
                if finished:
                    assert lease is not None and await client.release(lease)
                await settle(client)
                assert raw.exists(client.key_prefix + name.encode()) == 0, f"left behind after {k}"
                if fresh:
                    await client.close()
                    client = new_client()
                    cleanups = _count_cleanups(client)
                orphaned += cleanups.count(name.encode())
            await client.close()
        assert outcomes == {True, False}, "the range must cover cancels before and after completion"
        assert orphaned > 0, "no cancel landed after the SET went out: the interesting case was missed"

    arun(body)


def test_wait_for_with_tiny_timeouts(arun: Runner, new_client: NewClient, raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            await client.query("warm-up")
            timeouts = [0, 1e-6, 1e-5, 3e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3]
            for round_no in range(3):
                for timeout in timeouts:
                    name = f"w:{round_no}:{timeout}"
                    try:
                        lease = await asyncio.wait_for(client.try_acquire(name, 30), timeout)
                    except asyncio.TimeoutError:
                        continue
                    assert lease is not None and await client.release(lease)
            await settle(client)
            assert keys_left(raw, client.key_prefix) == []

    arun(body)


def test_cancelled_blocking_acquire_leaves_nothing(arun: Runner, new_client: NewClient,
                                                   raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            holder = await client.try_acquire("contended", 30)
            assert holder is not None
            waiters = [client.lock("contended", 30) for _ in range(20)]
            tasks = [asyncio.ensure_future(lock.acquire()) for lock in waiters]
            for i, task in enumerate(tasks):  # cancels spread over waits, sends and replies
                for _ in range(i % 7):
                    await asyncio.sleep(0.0005 if i % 2 else 0)
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            assert all(task.cancelled() for task in tasks)
            assert all(lock.lease is None for lock in waiters)
            assert await client.release(holder)

            # Now cancel waiters while the lock frees up: some may win it, none may leak it.
            holder = await client.try_acquire("contended", 30)
            assert holder is not None
            tasks = [asyncio.ensure_future(lock.acquire()) for lock in waiters]
            await asyncio.sleep(0.002)
            releasing = asyncio.ensure_future(client.release(holder))
            for i, task in enumerate(tasks):
                for _ in range(i % 5):
                    await asyncio.sleep(0)
                task.cancel()
            await releasing
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for lock, result in zip(waiters, results, strict=True):
                if result is True:
                    await lock.release()
                else:
                    assert lock.lease is None
            await settle(client)
            assert keys_left(raw, client.key_prefix) == []

    arun(body)


def test_cancelled_acquire_many_leaves_nothing(arun: Runner, new_client: NewClient, raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(chunk_size=400) as client:
            await client.query("warm-up")
            cleanups = _count_cleanups(client)
            for k in (0, 1, 2, 3, 5, 8, 13):
                names = [f"m:{k}:{i}" for i in range(2000)]
                finished, result = await cancel_after(client.acquire_many(names, 30), k)
                if finished:
                    await client.release_many(result.acquired)
                await settle(client)
                assert keys_left(raw, client.key_prefix) == [], f"left behind after {k} iterations"
            assert cleanups, "no cancel landed mid-batch"

    arun(body)


def test_cancelled_release_keeps_the_connection_usable_and_is_retried(arun: Runner, new_client: NewClient,
                                                                     raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(max_connections=1) as client:
            leases = [await client.try_acquire(f"r{i}", 30) for i in range(40)]
            raw.set(client.key_prefix + b"other", b"x", px=60000)
            for k, lease in enumerate(leases):
                assert lease is not None
                if k % 3 == 0:  # a pending cleanup puts one more await in front of the release
                    client._remember_cleanup(b"ghost", b"g" * 16, time.monotonic() + 30)
                await cancel_after(client.release(lease), 1 + k % 4)
                # Replies still match their calls: an answer for the cancelled release never
                # lands on this query.
                info = await client.query("other")
                assert info.held and info.remaining is not None and info.remaining > 50
                assert await client.query(f"free{k}") == LockInfo(False, None)
            await settle(client)
            assert keys_left(raw, client.key_prefix) == [client.key_prefix + b"other"]
            raw.delete(client.key_prefix + b"other")

            # Cancelled bulk releases too.
            for k in (1, 2, 3):
                result = await client.acquire_many([f"b{i}" for i in range(1500)], 30)
                await cancel_after(client.release_many(result.acquired), k)
                await settle(client)
                assert keys_left(raw, client.key_prefix) == []

            # A release cancelled before its task ever ran did nothing: the lease still holds.
            lease = await client.try_acquire("unstarted", 30)
            assert lease is not None
            assert await cancel_after(client.release(lease), 0) == (False, None)
            assert await client.check(lease) is not None
            assert await client.release(lease)

    arun(body)


def test_cancelled_fenced_acquire_many_leaves_nothing(arun: Runner, new_client: NewClient,
                                                      raw: redis.Redis) -> None:
    # Fenced on one server: one transaction per 1000 locks, eight per write; a cancel lands
    # between writes (scripts flushed or not: nothing to load again), and what the transactions
    # in flight took is released when they answer. The cancels land at fractions of an uncancelled call's time
    # (loop iterations alone pass before the first write once the checks are quick).
    async def body() -> None:
        async with new_client() as client:
            await client.query("warm-up")
            took = math.inf  # an uncancelled call's time, warm (the first call's runs cold code)
            for run in range(3):
                started = time.monotonic()
                whole = await client.acquire_many([f"f:whole:{run}:{i}" for i in range(20_000)], 30,
                                                  fenced=True)
                took = min(took, time.monotonic() - started)
                await client.release_many(whole.acquired)
            cleanups = _count_cleanups(client)

            async def cancelled_at(label: str, iterations: int, fraction: float) -> bool:
                """One call cancelled after ``iterations`` and ``fraction`` of ``took``: finished?"""
                names = [f"f:{label}:{i}" for i in range(20_000)]
                finished, result = await cancel_after(client.acquire_many(names, 30, fenced=True),
                                                       iterations, took * fraction)
                if finished:
                    await client.release_many(result.acquired)
                await settle(client)
                left = [key for key in keys_left(raw, client.key_prefix) if not key.endswith(b":fence")]
                assert left == [], f"left behind ({label})"
                return bool(finished)

            for k, flush in itertools.product((0, 1, 2, 3, 5, 8, 13), (False, True)):
                if flush:  # the transactions' EVAL needs no script loaded
                    raw.script_flush()
                await cancelled_at(f"{k}:{flush}", k, k / 10)
            # A loaded host can make every fixed fraction miss the writes: search for them (a
            # finished call was cancelled too late, one that left no cleanup too early).
            fraction, low, high = 0.5, 0.0, 1.5
            for attempt in range(24):
                if cleanups:
                    break
                before = len(cleanups)
                if await cancelled_at(f"search:{attempt}", 0, fraction):
                    high = fraction
                elif len(cleanups) == before:
                    low = fraction
                fraction = (low + high) / 2 if high - low > 0.02 else random.uniform(0.0, 1.5)
            assert cleanups, "no cancel landed mid-batch"

    arun(body)


def test_cancelled_calls_interleaved_with_live_ones(arun: Runner, new_client: NewClient,
                                                    raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(max_connections=2) as client:
            for i in range(0, 200, 2):
                raw.set(client.key_prefix + f"q{i}".encode(), b"x", px=60000)
            lease = await client.try_acquire("mine", 30)
            assert lease is not None
            tasks = []
            for i in range(200):
                tasks.append(asyncio.ensure_future(client.query(f"q{i}")))
                tasks.append(asyncio.ensure_future(client.check(lease)))
            await asyncio.sleep(0)
            for task in tasks[::3]:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for i, result in enumerate(results):
                if i % 3 == 0:
                    continue
                if i % 2 == 0:
                    assert isinstance(result, LockInfo) and result.held == ((i // 2) % 2 == 0), i
                else:
                    assert isinstance(result, float) and 29 < result <= 30, i
            assert await client.release(lease)

    arun(body)


@pytest.mark.parametrize("control", [False, True], ids=["handed-over", "control"])
def test_a_cancel_with_a_write_of_transactions_in_flight_releases_what_it_took(
        arun: Runner, new_client: NewClient, raw: redis.Redis, monkeypatch: pytest.MonkeyPatch,
        control: bool) -> None:
    # 17 transactions of 1000 fenced locks, eight per write: the third write is encoded once the
    # first has answered; cancelling there leaves the second write's 8,000 locks (and the third's
    # 1,000: it goes out before the task sees its cancel) to the protocol, which hands their
    # replies (a transaction's every reply, unfolded) to the orphan handler. The control drops
    # them and must find those 9,000 held.
    from turbolock._flows.bulk_plan import AcquirePlan

    encoded = 0
    task: asyncio.Future[Any] | None = None
    reencode = AcquirePlan.reencode_calls

    def cancel_at_the_third_write(plan: AcquirePlan, buf: Any, calls: Any) -> None:
        nonlocal encoded
        encoded += 1
        if encoded == 3 and task is not None:
            task.cancel()
        reencode(plan, buf, calls)

    monkeypatch.setattr(AcquirePlan, "reencode_calls", cancel_at_the_third_write)

    async def body() -> None:
        nonlocal task
        async with new_client() as client:
            if control:
                client._exec.pool.on_orphan = lambda tag, reply: None
            await client.query("warm-up")
            names = [f"tx:{i}" for i in range(17_000)]
            task = asyncio.ensure_future(client.acquire_many(names, 30, fenced=True))
            with pytest.raises(asyncio.CancelledError):
                await task
            assert encoded == 3, "the cancel did not land between writes"
            await settle(client)
            left = [key for key in keys_left(raw, client.key_prefix) if not key.endswith(b":fence")]
            assert len(left) == (9000 if control else 0), f"{len(left)} locks left behind"
            raw.delete(*left or [b"none"])

    arun(body)
