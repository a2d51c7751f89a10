"""AsyncLock: async with, coroutine decorator, explicit calls; ownership by object, never by task."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from async_helpers import NewClient, Runner

from turbolock import (
    InvalidArgumentTypeError,
    LockLostError,
    LockNotAcquiredError,
    LockNotOwnedError,
    LockUsageError,
)


def test_async_with_holds_and_releases(arun: Runner, new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            async with client.lock("w", 5) as lock:
                assert await lock.owned() and await lock.locked()
                assert 4 < await lock.remaining() <= 5 and 4 < lock.valid_for() <= 5
                lock.ensure_held()
                assert await client.try_acquire("w", 5) is None
            assert not (await client.query("w")).held
            assert lock.lease is None and await lock.remaining() == 0.0 and not await lock.owned()
            with pytest.raises(LockLostError):
                lock.ensure_held()

    arun(body)


def test_async_with_raises_when_not_acquired(arun: Runner, new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            holder = await client.try_acquire("taken", 30)
            assert holder is not None
            with pytest.raises(LockNotAcquiredError, match="taken"):
                async with client.lock("taken", 5, blocking=False):
                    pytest.fail("the body must not run")
            started = time.monotonic()
            with pytest.raises(LockNotAcquiredError, match=r"within 0\.1s"):
                async with client.lock("taken", 5, timeout=0.1):
                    pytest.fail("the body must not run")
            assert 0.09 <= time.monotonic() - started < 2.0
            assert await client.release(holder)

    arun(body)


def test_lost_lock_reported_at_exit_unless_the_block_failed(arun: Runner, new_client: NewClient,
                                                           raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            with pytest.raises(LockNotOwnedError):
                async with client.lock("lost", 5):
                    raw.set(client.key_prefix + b"lost", b"thief", px=5000)
            assert raw.get(client.key_prefix + b"lost") == b"thief"
            with pytest.raises(KeyError):
                async with client.lock("lost2", 5):
                    raw.delete(client.key_prefix + b"lost2")
                    raise KeyError("from the block")

    arun(body)


def test_ownership_belongs_to_the_object_not_the_task(arun: Runner, new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            lock = client.lock("handoff", 5)
            assert await asyncio.create_task(lock.acquire())
            await asyncio.create_task(lock.release())  # another task releases it
            assert not (await client.query("handoff")).held

            # Two Lock objects in one task exclude each other; each has its own token.
            first, second = client.lock("same", 5), client.lock("same", 5)
            assert await first.acquire(blocking=False)
            assert not await second.acquire(blocking=False)
            await first.release()
            assert await second.acquire(blocking=False)
            assert first.lease is None and second.lease is not None
            await second.release()

            # Tasks share nothing: every lease taken concurrently has a token of its own.
            locks = [client.lock(f"tok{i}", 5) for i in range(50)]
            assert all(await asyncio.gather(*(lock.acquire() for lock in locks)))
            tokens = {lock.lease.token for lock in locks if lock.lease is not None}
            assert len(tokens) == 50
            await asyncio.gather(*(lock.release() for lock in locks))

    arun(body)


def test_usage_errors(arun: Runner, new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            lock = client.lock("use", 5)
            with pytest.raises(LockUsageError):
                await lock.release()
            with pytest.raises(LockUsageError):
                await lock.extend()
            assert await lock.acquire()
            with pytest.raises(LockUsageError, match="already held"):
                await lock.acquire()
            await lock.extend(10)
            assert 9 < await lock.remaining() <= 10
            await lock.release()
            unrenewed = client.lock("unrenewed", 5)
            await unrenewed.acquire()
            with pytest.raises(LockUsageError, match="auto-renewed"):
                await unrenewed.wait_lost(0.01)
            await unrenewed.release()

    arun(body)


def test_extend_of_a_lost_lock_raises_and_marks_it_lost(arun: Runner, new_client: NewClient,
                                                        raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            lock = client.lock("ext", 5)
            await lock.acquire()
            raw.delete(client.key_prefix + b"ext")
            with pytest.raises(LockNotOwnedError):
                await lock.extend()
            assert lock.lease is not None and lock.lease.is_lost and lock.valid_for() == 0.0
            with pytest.raises(LockNotOwnedError):  # the loss again, not a misuse
                await lock.release()

    arun(body)


def test_decorator_runs_each_call_under_a_fresh_lock(arun: Runner, new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            inside = 0
            most = 0

            @client.lock("job", 5, timeout=5)
            async def job(n: int) -> int:
                nonlocal inside, most
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0.002)
                inside -= 1
                return n * 2

            assert job.__name__ == "job"
            assert await asyncio.gather(*(job(i) for i in range(10))) == [i * 2 for i in range(10)]
            assert most == 1
            assert not (await client.query("job")).held

            with pytest.raises(InvalidArgumentTypeError) as raised:
                client.lock("sync", 5)(lambda: None)  # type: ignore[arg-type, return-value]
            assert raised.value.argument == "func"

    arun(body)


def test_blocking_acquire_waits_for_release_and_gives_up_at_timeout(arun: Runner,
                                                                  new_client: NewClient) -> None:
    async def body() -> None:
        async with new_client() as client:
            holder = await client.try_acquire("wait", 10)
            assert holder is not None

            async def release_soon() -> None:
                await asyncio.sleep(0.05)
                assert holder is not None and await client.release(holder)

            releaser = asyncio.create_task(release_soon())
            lock = client.lock("wait", 5)
            started = time.monotonic()
            assert await lock.acquire(timeout=3)
            assert 0.04 < time.monotonic() - started < 1.0
            await releaser

            started = time.monotonic()
            assert not await client.lock("wait", 5).acquire(timeout=0.15)
            assert 0.14 <= time.monotonic() - started < 1.0
            assert not await client.lock("wait", 5).acquire(timeout=0)
            await lock.release()

    arun(body)


def test_repr_hides_the_token(new_client: NewClient) -> None:
    client = new_client()
    lock = client.lock("r", 5, token=b"SECRET-TOKEN-0123456789")
    assert repr(lock) == "AsyncLock(name='r', ttl=5, held=False)"
    assert "SECRET" not in repr(lock)
