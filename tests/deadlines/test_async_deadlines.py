"""Every call of ``AsyncLockClient`` keeps its deadline against a server that stops answering.

The same promise as ``test_sync_deadlines``: with ``timeout=T`` (and ``connect_timeout=T``)
each call, the call right after a failed one, and ``close()`` end within T + ``SLACK``, a failed
call raising a ``turbolock.ConnectionError`` subclass; an ``AsyncLock`` keeps its own wait.

The sequences run on asyncio's own loop (they are slow by nature: every call waits out its
deadline); one runs on uvloop as well when it is installed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from _netfaults import Fault, Stopwatch
from turbolock import ConnectionError, Lease, LockNotAcquiredError
from turbolock.asyncio import AsyncLockClient

from .conftest import LOOPS, Runner, run_in_new_loop

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

T = 0.3
TTL = 10
NAMES = ["bulk:a", "bulk:b", "bulk:c"]


def _client(fault: Fault, core_name: str, key_prefix: str, timeout: float = T) -> AsyncLockClient:
    return AsyncLockClient.from_url(fault.url, core=core_name, key_prefix=key_prefix, timeout=timeout,
                                    connect_timeout=timeout)


async def _take(client: AsyncLockClient, name: str) -> Lease:
    lease = await client.try_acquire(name, TTL)
    assert lease is not None, f"could not take {name!r} before the fault"
    return lease


async def _fails(watch: Stopwatch, label: str, call: Callable[[], Awaitable[Any]], budget: float = T) -> None:
    outcome = await watch.arun(label, budget, call)
    watch.expect_raises(outcome, ConnectionError)


async def _close(watch: Stopwatch, client: AsyncLockClient, budget: float = T) -> None:
    closed = await watch.arun("close", budget, client.close)
    watch.expect(closed, closed.error is None, "returned")


async def _single_calls(fault: Fault, core_name: str, key_prefix: str) -> Stopwatch:
    client = _client(fault, core_name, key_prefix)
    watch = Stopwatch()
    try:
        leases: dict[str, Lease] = {}
        if fault.warm:
            for name in ("rel", "ext", "chk"):
                leases[name] = await _take(client, name)
            fault.inject()
        await _fails(watch, "try_acquire", lambda: client.try_acquire("t", TTL))
        await _fails(watch, "try_acquire(fenced=True)", lambda: client.try_acquire("tf", TTL, fenced=True))
        await _fails(watch, "query (after a lost acquire)", lambda: client.query("q"))
        if leases:
            await _fails(watch, "release", lambda: client.release(leases["rel"]))
            await _fails(watch, "extend (after a lost release)", lambda: client.extend(leases["ext"], TTL))
            await _fails(watch, "check", lambda: client.check(leases["chk"]))
        await _close(watch, client)
    finally:
        fault.heal()
        await client.close()
    return watch


def test_single_lock_calls_keep_their_deadline(arun_asyncio: Runner, fault: Fault, core_name: str,
                                               key_prefix: str) -> None:
    """try_acquire, query, release, extend, check and close(), one after the other: each call
    after a failed one is also "the next call" (after a lost acquire, after a lost release)."""
    arun_asyncio(lambda: _single_calls(fault, core_name, key_prefix)).check()


@pytest.mark.skipif("uvloop" not in LOOPS, reason="uvloop is not installed")
@pytest.mark.parametrize("fault", ["blackhole"], indirect=True)
def test_single_lock_calls_keep_their_deadline_on_uvloop(fault: Fault, core_name: str,
                                                         key_prefix: str) -> None:
    run_in_new_loop("uvloop", lambda: _single_calls(fault, core_name, key_prefix)).check()


def test_bulk_calls_keep_their_deadline(arun_asyncio: Runner, fault: Fault, core_name: str,
                                        key_prefix: str) -> None:
    """acquire_many, query_many, release_many, extend_many and close(), one after the other."""
    async def body() -> Stopwatch:
        client = _client(fault, core_name, key_prefix)
        watch = Stopwatch()
        try:
            to_release: list[Lease] = []
            to_extend: list[Lease] = []
            if fault.warm:
                to_release = (await client.acquire_many([f"rel:{i}" for i in range(3)], TTL)).acquired
                to_extend = (await client.acquire_many([f"ext:{i}" for i in range(3)], TTL)).acquired
                assert len(to_release) == len(to_extend) == 3
                fault.inject()
            await _fails(watch, "acquire_many", lambda: client.acquire_many(NAMES, TTL))
            await _fails(watch, "acquire_many(fenced=True)",
                         lambda: client.acquire_many(NAMES, TTL, fenced=True))
            await _fails(watch, "query_many (after a lost acquire_many)", lambda: client.query_many(NAMES))
            await _fails(watch, "acquire_many(limit=2)", lambda: client.acquire_many(NAMES, TTL, limit=2))
            await _fails(watch, "acquire_many(limit=2, fenced=True)",
                         lambda: client.acquire_many(NAMES, TTL, limit=2, fenced=True))
            if to_release:
                await _fails(watch, "release_many", lambda: client.release_many(to_release))
                await _fails(watch, "extend_many (after a lost release_many)",
                             lambda: client.extend_many(to_extend, TTL))
            await _close(watch, client)
        finally:
            fault.heal()
            await client.close()
        return watch

    arun_asyncio(body).check()


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_wait_shorter_than_the_call_timeout_is_kept(arun_asyncio: Runner, fault: Fault, core_name: str,
                                                      key_prefix: str, fair: bool) -> None:
    """Client timeout 1 s, AsyncLock wait 0.3 s: acquire() ends by 0.3 s (False or a
    ConnectionError), and an ``async with`` block raises by then."""
    wait = 0.3

    async def body() -> Stopwatch:
        client = _client(fault, core_name, key_prefix, timeout=1.0)
        watch = Stopwatch()
        try:
            if fault.warm:
                assert (await client.query("warm-up")).held is False
                fault.inject()
            lock = client.lock("z", 5, timeout=wait, fair=fair)
            outcome = await watch.arun("AsyncLock.acquire() with timeout=0.3", wait, lock.acquire)
            watch.expect(outcome, outcome.result is False or isinstance(outcome.error, ConnectionError),
                         "returned False or raised a ConnectionError")

            async def with_block() -> None:
                async with client.lock("w", 5, timeout=wait, fair=fair):
                    pass

            outcome = await watch.arun("async with client.lock(timeout=0.3)", wait, with_block)
            watch.expect_raises(outcome, LockNotAcquiredError, ConnectionError)
            await _close(watch, client, 1.0)
        finally:
            fault.heal()
            await client.close()
        return watch

    arun_asyncio(body).check()


@pytest.mark.parametrize("fault", ["silent"], indirect=True)
@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_wait_longer_than_the_call_timeout_keeps_trying(arun_asyncio: Runner, fault: Fault, core_name: str,
                                                          key_prefix: str, fair: bool) -> None:
    """Client timeout 0.3 s, AsyncLock wait 0.8 s: a lost reply does not end the wait; every
    attempt fails, so acquire() returns False and ``async with`` raises LockNotAcquiredError,
    both by 0.8 s and not before the last attempt had its chance (0.8 - 0.3 s)."""
    wait = 0.8

    async def body() -> Stopwatch:
        client = _client(fault, core_name, key_prefix)
        watch = Stopwatch()
        try:
            if fault.warm:
                assert (await client.query("warm-up")).held is False
                fault.inject()
            lock = client.lock("z", 5, timeout=wait, fair=fair)
            outcome = await watch.arun("AsyncLock.acquire() with timeout=0.8", wait, lock.acquire)
            watch.expect(outcome, outcome.error is None and outcome.result is False, "returned False")
            watch.expect(outcome, outcome.elapsed >= wait - T, f"kept trying for at least {wait - T:.1f}s")

            async def with_block() -> None:
                async with client.lock("w", 5, timeout=wait, fair=fair):
                    pass

            outcome = await watch.arun("async with client.lock(timeout=0.8)", wait, with_block)
            watch.expect_raises(outcome, LockNotAcquiredError)
            watch.expect(outcome, outcome.elapsed >= wait - T, f"kept trying for at least {wait - T:.1f}s")
        finally:
            fault.heal()
            await client.close()
        return watch

    arun_asyncio(body).check()
