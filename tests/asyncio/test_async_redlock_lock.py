"""AsyncRedlockLock: ``async with``, a decorator for coroutine functions, explicit calls, the
defaults every Lock object has, and ownership by object (never by task), on 3 and 5 masters."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from _async_redlock_workers import TTL, pttls, values
from async_helpers import Runner

from _raw import Raws
from turbolock import (
    ExtensionLimitError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockLostError,
    LockNotAcquiredError,
    LockNotOwnedError,
    LockUsageError,
    RedlockNotAcquiredError,
    RedlockResult,
    RedlockStatus,
)
from turbolock.asyncio import AsyncRedlockClient, AsyncRedlockLock
from turbolock.redis_server import RedisServer

MakeRedlock = Callable[..., AsyncRedlockClient]


def test_async_with_holds_on_a_majority_and_releases_everywhere(
        arun: Runner, masters: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str) -> None:
    count = len(masters)
    connections = raws(masters)

    async def body() -> None:
        async with make_async_redlock(masters) as client, make_async_redlock(masters) as other:
            lock = client.lock("report", TTL)
            assert isinstance(lock, AsyncRedlockLock)
            assert lock.status is None and lock.result is None and lock.lease is None
            assert lock.valid_for() == 0
            async with lock as entered:
                assert entered is lock
                assert lock.status is RedlockStatus.ACQUIRED and 0 < lock.valid_for() < TTL
                lock.ensure_held()
                assert isinstance(lock.result, RedlockResult) and lock.result.instances.acquired == count
                assert lock.lease is not None and lock.lease is lock.result.lease
                assert values(connections, key_prefix + "report") == [lock.lease.token] * count
                assert await lock.owned() is True and await lock.locked() is True
                assert TTL - 1 < await lock.remaining() <= TTL
                assert await lock.extend() is True and lock.lease.extensions == 1
                with pytest.raises(LockUsageError):
                    await lock.acquire()
                rival = other.lock("report", TTL, blocking=False)
                with pytest.raises(RedlockNotAcquiredError, match="conflicted") as info:
                    async with rival:
                        pytest.fail("the body must not run")
                assert isinstance(info.value, LockNotAcquiredError) and info.value.names == ["report"]
                assert info.value.result is not None and info.value.result.status is RedlockStatus.CONFLICTED
                assert rival.status is RedlockStatus.CONFLICTED and rival.lease is None
                assert await rival.locked() is True and await rival.owned() is False
                assert await rival.remaining() == 0.0
            assert lock.status is RedlockStatus.UNLOCKED and lock.lease is None and lock.valid_for() == 0
            assert values(connections, key_prefix + "report") == [None] * count
            assert await lock.owned() is False and await lock.locked() is False
            assert await lock.remaining() == 0.0
            with pytest.raises(LockLostError):
                lock.ensure_held()
            async with lock:  # the same object again, after its release
                assert lock.status is RedlockStatus.ACQUIRED
            assert lock.status is RedlockStatus.UNLOCKED

    arun(body)


def test_async_with_gives_up_at_its_timeout(arun: Runner, three: list[RedisServer],
                                           make_async_redlock: MakeRedlock) -> None:
    async def body() -> None:
        async with make_async_redlock(three) as holder, make_async_redlock(three, retry_delay=0.02) as client:
            lease = await holder.try_acquire("taken", 30)
            assert lease is not None
            started = time.monotonic()
            with pytest.raises(RedlockNotAcquiredError, match=r"within 0\.1s") as info:
                async with client.lock("taken", TTL, timeout=0.1):
                    pytest.fail("the body must not run")
            elapsed = time.monotonic() - started
            assert 0.09 <= elapsed < 1.1, f"a 0.1 s wait took {elapsed:.3f}s"
            result = info.value.result
            assert result is not None and result.status is RedlockStatus.CONFLICTED and result.attempts > 1
            started = time.monotonic()
            assert await client.lock("taken", TTL).acquire(timeout=0) is False
            assert await client.lock("taken", TTL).acquire(blocking=False) is False
            assert await client.lock("taken", TTL, timeout=0.05).acquire() is False
            assert time.monotonic() - started < 1.5
            one = client.lock("taken", TTL, blocking=False)
            assert await one.acquire() is False and one.result is not None and one.result.attempts == 1
            assert await holder.release(lease)

    arun(body)


def test_a_lock_lost_inside_the_block_is_reported_at_exit(arun: Runner, three: list[RedisServer],
                                                          make_async_redlock: MakeRedlock, raws: Raws,
                                                          key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client:
            with pytest.raises(LockNotOwnedError):
                async with client.lock("vanishing", TTL):
                    for raw in connections:
                        raw.delete(key_prefix + "vanishing")
            with pytest.raises(ZeroDivisionError):  # the block's own error wins over the lost lock
                async with client.lock("vanishing", TTL):
                    for raw in connections:
                        raw.delete(key_prefix + "vanishing")
                    1 / 0  # noqa: B018
            with pytest.raises(LockNotOwnedError):  # taken over on a majority: left to the thief
                async with client.lock("stolen", TTL):
                    for raw in connections[:2]:
                        raw.set(key_prefix + "stolen", b"thief", px=60_000)
            assert values(connections, key_prefix + "stolen") == [b"thief", b"thief", None]
            with pytest.raises(LockUsageError, match="released inside"):
                async with client.lock("inside", TTL) as lock:
                    await lock.release()

    arun(body)


def test_explicit_calls(arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
                        key_prefix: str) -> None:
    connections = raws(three)
    key = key_prefix + "shard:3"

    async def body() -> None:
        async with make_async_redlock(three) as client:
            lock = client.lock("shard:3", 5)
            with pytest.raises(LockUsageError):
                await lock.release()
            with pytest.raises(LockUsageError):
                await lock.extend()
            with pytest.raises(LockUsageError):
                _ = lock.lost
            assert await lock.acquire(timeout=0) is True
            assert isinstance(lock.lost, threading.Event) and not lock.lost.is_set()
            assert await lock.extend(10) is True
            assert 9 < await lock.remaining() <= 10
            assert all(9_000 < p <= 10_000 for p in pttls(connections, key))
            assert await lock.extend(5, additive=True) is True  # 5 s more than is left
            assert 14 < await lock.remaining() <= 15
            assert all(14_000 < p <= 15_000 for p in pttls(connections, key))
            await lock.release()
            assert values(connections, key) == [None] * 3

            # Taken over on a majority: extend and release say so; the lock keeps its lease, lost,
            # and the release deletes what is still ours (master 0's key).
            assert await lock.acquire(blocking=False) is True
            for raw in connections[1:]:
                raw.set(key, b"thief", px=60_000)
            with pytest.raises(LockNotOwnedError):
                await lock.extend()
            assert lock.lease is not None and lock.lease.is_lost and lock.valid_for() == 0
            with pytest.raises(LockNotOwnedError):
                await lock.release()
            assert values(connections, key) == [None, b"thief", b"thief"]
            for raw in connections:
                raw.delete(key)
            assert await lock.acquire(blocking=False) is True
            for raw in connections[:2]:
                raw.set(key, b"thief", px=60_000)
            with pytest.raises(LockNotOwnedError):
                await lock.release()
            assert lock.lease is None and values(connections, key) == [b"thief", b"thief", None]

            limited = client.lock("limited", TTL, max_extensions=1)
            assert await limited.acquire()
            assert await limited.extend() is True
            with pytest.raises(ExtensionLimitError):
                await limited.extend()
            await limited.release()

    arun(body)


def test_lock_defaults(arun: Runner, three: list[RedisServer], make_async_redlock: MakeRedlock, raws: Raws,
                      key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three) as client, make_async_redlock(three) as holder:
            # No ttl: 30 s, renewed until released.
            default = client.lock("default")
            assert default.ttl == 30
            assert await default.acquire()
            assert default.lease is not None and default.lease.auto_renew and client.renewing == 1
            assert all(29_000 < p <= 30_000 for p in pttls(connections, key_prefix + "default"))
            await default.release()
            assert client.renewing == 0
            assert values(connections, key_prefix + "default") == [None] * 3
            # No ttl and auto_renew=False: 30 s, not renewed; a ttl: not renewed unless asked.
            plain = client.lock("plain", auto_renew=False)
            assert await plain.acquire() and plain.lease is not None and not plain.lease.auto_renew
            assert client.renewing == 0
            await plain.release()
            short = client.lock("short", TTL)
            assert await short.acquire() and short.lease is not None and not short.lease.auto_renew
            await short.release()
            renewed = client.lock("renewed", TTL, auto_renew=True)
            assert await renewed.acquire() and renewed.lease is not None and renewed.lease.auto_renew
            assert client.renewing == 1
            await renewed.release()
            assert client.renewing == 0

            # timeout=None (the default): waits until the lock is free.
            lease = await holder.try_acquire("wait", 30)
            assert lease is not None

            async def release_soon() -> None:
                await asyncio.sleep(0.2)
                assert lease is not None and await holder.release(lease)

            releaser = asyncio.ensure_future(release_soon())
            waiting = client.lock("wait", TTL)
            started = time.monotonic()
            assert await waiting.acquire() is True
            assert 0.19 <= time.monotonic() - started < 3.0
            await releaser
            await waiting.release()

            with pytest.raises(InvalidArgumentError) as raised:
                await client.lock("wait", TTL).acquire(blocking=False, timeout=1)
            assert raised.value.argument == "blocking"

    arun(body)


def test_ownership_belongs_to_the_object_not_the_task(arun: Runner, three: list[RedisServer],
                                                      make_async_redlock: MakeRedlock) -> None:
    async def body() -> None:
        async with make_async_redlock(three) as client:
            lock = client.lock("handoff", TTL)
            assert await asyncio.create_task(lock.acquire())
            await asyncio.create_task(lock.release())  # another task releases it
            assert not (await client.query("handoff")).held

            # Two lock objects in one task exclude each other; each has its own token.
            first, second = client.lock("same", TTL), client.lock("same", TTL)
            assert await first.acquire(blocking=False)
            assert not await second.acquire(blocking=False)
            await first.release()
            assert await second.acquire(blocking=False)
            assert first.lease is None and second.lease is not None
            await second.release()

            copy = first.copy()
            assert isinstance(copy, AsyncRedlockLock) and copy is not first
            assert copy.name == "same" and copy.ttl == TTL and copy.lease is None
            assert await first.acquire(blocking=False)
            assert copy.lease is None and not await copy.acquire(blocking=False)
            await first.release()
            assert await copy.acquire(blocking=False)
            await copy.release()

            locks = [client.lock(f"tok{i}", TTL) for i in range(20)]
            assert all(await asyncio.gather(*(lock.acquire() for lock in locks)))
            assert len({lock.lease.token for lock in locks if lock.lease is not None}) == 20
            await asyncio.gather(*(lock.release() for lock in locks))

    arun(body)


def test_decorator_runs_each_call_under_a_fresh_lock(arun: Runner, three: list[RedisServer],
                                                     make_async_redlock: MakeRedlock, raws: Raws,
                                                     key_prefix: str) -> None:
    connections = raws(three)

    async def body() -> None:
        async with make_async_redlock(three, retry_delay=0.005) as client:
            inside = 0
            most = 0
            seen: list[list[bytes | None]] = []

            @client.lock("job", TTL, timeout=10)
            async def job(n: int) -> int:
                nonlocal inside, most
                inside += 1
                most = max(most, inside)
                seen.append(values(connections, key_prefix + "job"))
                await asyncio.sleep(0.002)
                inside -= 1
                return n * 2

            assert job.__name__ == "job"
            assert await asyncio.gather(*(job(i) for i in range(6))) == [i * 2 for i in range(6)]
            assert most == 1 and len(seen) == 6
            # Inside, one token is on a majority (the free master may hold a waiter's attempt
            # for a moment, until it sees it lost and releases it), a new one for each call.
            tokens = [max(set(held), key=held.count) for held in seen]
            assert all(token is not None and held.count(token) >= 2
                       for token, held in zip(tokens, seen, strict=True)), seen
            assert len(set(tokens)) == 6, "each call under a fresh token"
            assert values(connections, key_prefix + "job") == [None] * 3

            with pytest.raises(InvalidArgumentTypeError) as raised:
                client.lock("sync", TTL)(lambda: None)  # type: ignore[arg-type, return-value]
            assert raised.value.argument == "func"

    arun(body)


def test_repr_hides_the_token(arun: Runner, three: list[RedisServer],
                              make_async_redlock: MakeRedlock) -> None:
    async def body() -> None:
        async with make_async_redlock(three) as client:
            lock = client.lock("r", 5, token=b"SECRET-TOKEN-0123456789")
            assert repr(lock).startswith("AsyncRedlockLock(") and "'r'" in repr(lock)
            async with lock:
                assert "SECRET" not in repr(lock) and "SECRET" not in repr(lock.lease)
                assert "SECRET" not in repr(lock.result)
            assert "SECRET" not in repr(lock)

    arun(body)
