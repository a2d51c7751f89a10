"""README "Auto-renewal": a renewed lease the program no longer references is not renewed
forever; the renewer releases it. An object that keeps its lease and gave its own method as
``on_lost`` (``on_lost=self.stop``) made a cycle the renewer rooted (it held ``on_lost``): once
the program dropped the object, its lock was still renewed, for good (found in review). The
lease now keeps its ``on_lost`` itself, so the cycle is the program's alone, and collected."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
import redis

from _eventually import eventually
from turbolock import Lease, LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

TTL = 0.3


class Worker:
    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.stopped = False

    def stop(self, lease: Lease) -> None:
        self.stopped = True


@pytest.mark.parametrize("bulk", [False, True], ids=["single", "bulk"])
def test_threads(redis_server: RedisServer, raw: redis.Redis, core_name: str, key_prefix: str,
                 bulk: bool) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        worker = Worker()
        if bulk:
            result = client.acquire_many(["job"], TTL, auto_renew=True, on_lost=worker.stop)
            worker.lease = result.acquired[0]
            del result
        else:
            worker.lease = client.try_acquire("job", TTL, auto_renew=True, on_lost=worker.stop)
        assert worker.lease is not None and client.renewing == 1
        del worker
        gc.collect()
        assert eventually(lambda: client.renewing == 0, 3 * TTL + 1), "the dropped worker's lock is renewed"
        assert eventually(lambda: not raw.exists(key_prefix + "job"), 2), "the dropped worker's lock is held"


def test_on_lost_still_called_for_a_lease_kept(redis_server: RedisServer, raw: redis.Redis, core_name: str,
                                               key_prefix: str) -> None:
    """The control: with the worker kept, its lock is renewed, and ``on_lost`` still comes."""
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        worker = Worker()
        worker.lease = client.try_acquire("job", TTL, auto_renew=True, on_lost=worker.stop)
        assert worker.lease is not None
        gc.collect()
        time.sleep(3 * TTL)
        assert client.renewing == 1 and raw.exists(key_prefix + "job")
        raw.delete(key_prefix + "job")
        assert eventually(lambda: worker.stopped, 3 * TTL + 1)
        assert worker.lease.lost.is_set()


def test_asyncio(redis_server: RedisServer, raw: redis.Redis, core_name: str, key_prefix: str) -> None:
    async def main() -> None:
        async with AsyncLockClient.from_url(redis_server.url, core=core_name,
                                            key_prefix=key_prefix) as client:
            worker = Worker()
            worker.lease = await client.try_acquire("job", TTL, auto_renew=True, on_lost=worker.stop)
            assert worker.lease is not None and client.renewing == 1
            del worker
            gc.collect()
            for _ in range(int((3 * TTL + 1) / 0.02)):
                if client.renewing == 0 and not raw.exists(key_prefix + "job"):
                    break
                await asyncio.sleep(0.02)
            assert client.renewing == 0 and not raw.exists(key_prefix + "job")

    asyncio.run(main())
