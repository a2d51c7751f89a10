"""An auto-renewed Lock object whose lock the renewer found lost (``on_lost`` ran, ``lock.lost``
is set, ``ensure_held()`` raises ``LockLostError``, nobody holds the name) can be acquired again,
as a redis-py Lock can, and as a leader-election loop (acquire, wait for ``lost``, acquire
again) needs. ``acquire()`` raised ``LockUsageError("... is already held by this Lock
object")``: the object knew the lock was gone and said the opposite (found in review)."""

from __future__ import annotations

import asyncio

import redis

from _eventually import eventually
from turbolock import LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.lease import Lease
from turbolock.redis_server import RedisServer

TTL = 0.6


def test_lock_lost_by_the_renewer_can_be_acquired_again(redis_server: RedisServer, core_name: str,
                                                        key_prefix: str, raw: redis.Redis) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        lost: list[Lease] = []
        lock = client.lock("leader", TTL, auto_renew=True, on_lost=lost.append)
        assert lock.acquire(timeout=0)
        raw.delete((key_prefix + "leader").encode())  # taken away behind its back
        assert lock.lost.wait(5)
        assert eventually(lambda: lost, 2.0)  # on_lost runs on the renewer just after the event is set
        assert lock.locked() is False
        assert lock.acquire(timeout=1) is True  # raised LockUsageError: "already held"
        lock.release()


def test_async_lock_lost_by_the_renewer_can_be_acquired_again(redis_server: RedisServer, core_name: str,
                                                              key_prefix: str, raw: redis.Redis) -> None:
    async def main() -> None:
        url = redis_server.url
        async with AsyncLockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
            lock = client.lock("leader", TTL, auto_renew=True)
            assert await lock.acquire(timeout=0)
            raw.delete((key_prefix + "leader").encode())
            assert await lock.wait_lost(5) is True
            assert await lock.locked() is False
            assert await lock.acquire(timeout=1) is True  # raised LockUsageError: "already held"
            await lock.release()

    asyncio.run(main())
