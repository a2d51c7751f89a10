"""A renewed lock that the program no longer references is not renewed forever: renewal stops,
the lock is released with its token, and a warning names it (python-redis-lock's behaviour).

The renewer watches its leases through weak references only. Each test checks the dropped lock
is gone from the server well within its ttl; the control keeps a reference and sees the lock
renewed past several ttls, so a renewer that released every lock would fail it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable

import pytest
import redis

from _eventually import gone_within as _gone_within
from turbolock import LockClient, RedlockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

TTL = 1.0


def _warned(caplog: pytest.LogCaptureFixture, name: str) -> bool:
    return any(record.levelno == logging.WARNING and repr(name) in record.getMessage()
               and "dropped its last reference" in record.getMessage() for record in caplog.records)


@pytest.fixture
def client(redis_server: RedisServer, core_name: str, key_prefix: str) -> LockClient:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as lock_client:
        yield lock_client  # type: ignore[misc]


def test_a_dropped_lock_object_is_released_with_a_warning(client: LockClient, raw: redis.Redis,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "turbolock")

    def take() -> None:
        lock = client.lock("job", TTL, auto_renew=True)
        assert lock.acquire()

    take()
    gc.collect()
    key = client.key_prefix + b"job"
    assert _gone_within(raw, key, TTL * 0.9), "the dropped lock was renewed (or left) instead of released"
    assert client.renewing == 0
    assert _warned(caplog, "job")


def test_dropped_leases_of_a_bulk_call_and_of_a_thread_are_released(client: LockClient, raw: redis.Redis,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "turbolock")
    names = [f"shard:{i}" for i in range(50)]
    assert len(client.acquire_many(names, TTL, auto_renew=True).acquired) == 50  # result dropped at once

    def worker() -> None:
        assert client.try_acquire("in-thread", TTL, auto_renew=True) is not None

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    gc.collect()
    keys = [client.key_prefix + name.encode() for name in [*names, "in-thread"]]
    end = time.monotonic() + TTL * 0.9
    while raw.exists(*keys) and time.monotonic() < end:
        time.sleep(0.01)
    assert raw.exists(*keys) == 0
    assert client.renewing == 0
    assert _warned(caplog, "in-thread") and _warned(caplog, "shard:7")


def test_a_referenced_lock_stays_renewed(client: LockClient, raw: redis.Redis) -> None:
    lock = client.lock("kept", TTL, auto_renew=True)
    assert lock.acquire()
    gc.collect()
    time.sleep(TTL * 3)
    lock.ensure_held()
    assert raw.exists(client.key_prefix + b"kept") == 1
    lock.release()


def test_a_dropped_asyncio_lock_is_released(redis_server: RedisServer, core_name: str, key_prefix: str,
                                           raw: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "turbolock")

    async def body() -> tuple[bool, int]:
        async with AsyncLockClient.from_url(redis_server.url, core=core_name,
                                            key_prefix=key_prefix) as aclient:
            async def take() -> None:
                lock = aclient.lock("ajob", TTL, auto_renew=True)
                assert await lock.acquire()

            await take()
            kept = await aclient.try_acquire("akept", TTL, auto_renew=True)
            gc.collect()
            key = aclient.key_prefix + b"ajob"
            end = time.monotonic() + TTL * 0.9
            while raw.exists(key) and time.monotonic() < end:
                await asyncio.sleep(0.01)
            await asyncio.sleep(TTL * 1.5)
            assert kept is not None and kept.valid_for() > 0  # the control: still renewed
            return raw.exists(key) == 0, aclient.renewing

    gone, renewing = asyncio.run(body())
    assert gone and renewing == 1
    assert _warned(caplog, "ajob")


def test_a_dropped_redlock_is_released_on_every_master(core_name: str, key_prefix: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "turbolock")
    with RedisServer() as a, RedisServer() as b, RedisServer() as c:
        raws = [redis.Redis(port=server.port) for server in (a, b, c)]
        try:
            with RedlockClient([a.url, b.url, c.url], core=core_name, key_prefix=key_prefix) as redlock:
                take: Callable[[], object] = lambda: redlock.try_acquire("rjob", TTL, auto_renew=True)  # noqa: E731
                assert take() is not None
                gc.collect()
                key = redlock.key_prefix + b"rjob"
                end = time.monotonic() + TTL * 0.9
                while any(raw.exists(key) for raw in raws) and time.monotonic() < end:
                    time.sleep(0.01)
                assert [raw.exists(key) for raw in raws] == [0, 0, 0]
                assert redlock.renewing == 0
        finally:
            for raw in raws:
                raw.close()
    assert _warned(caplog, "rjob")


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the renewer's rule: no core's own
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_close_releases_a_renewed_lock_whose_lease_was_just_dropped(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis, front: str) -> None:
    # close() released only the leases still referenced: one dropped since the renewer's last
    # wake-up stayed held for its whole ttl (found in review).
    def threads() -> None:
        client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
        kept = client.try_acquire("kept", 30, auto_renew=True)
        dropped = client.try_acquire("dropped", 30, auto_renew=True)
        assert kept is not None and dropped is not None
        time.sleep(0.02)  # the renewer took its wake-up for the acquires; its next is a poll away
        del dropped
        gc.collect()
        client.close()

    async def in_asyncio() -> None:
        client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
        kept = await client.try_acquire("kept", 30, auto_renew=True)
        dropped = await client.try_acquire("dropped", 30, auto_renew=True)
        assert kept is not None and dropped is not None
        del dropped
        gc.collect()
        await client.close()

    threads() if front == "threads" else asyncio.run(in_asyncio())
    assert raw.pttl(key_prefix + "kept") == -2
    left = raw.pttl(key_prefix + "dropped")
    assert left == -2, f"close() left the dropped lease's lock held for {left} ms more"
