"""``AutoRenew(max_hold=...)`` takes seconds or a ``timedelta``, as its error message says, and
both mean the same: the lock is renewed past its ttl and given up by max_hold, on every front
end. A ``timedelta`` used to pass the checks and then fail the acquire with a bare TypeError
after the lock was taken, leaving it held with no lease to release it."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
import redis

from _eventually import gone_within
from turbolock import AutoRenew, LockClient, RedlockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

TTL = 0.6
HOLDS = [pytest.param(TTL * 2, id="seconds"), pytest.param(timedelta(seconds=TTL * 2), id="timedelta")]


def _renewed_then_given_up(lost_after: float, renewals: int) -> None:
    assert renewals >= 1  # it outlived one ttl
    assert TTL < lost_after <= TTL * 2 + 0.3  # and was never held past max_hold


@pytest.mark.parametrize("max_hold", HOLDS)
def test_single_and_bulk(redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis,
                         max_hold: float | timedelta) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        started = time.monotonic()
        lease = client.try_acquire("one", TTL, auto_renew=AutoRenew(max_hold=max_hold))
        result = client.acquire_many(["a", "b"], TTL, auto_renew=AutoRenew(max_hold=max_hold))
        assert lease is not None and len(result.acquired) == 2
        for held in (lease, *result.acquired):
            assert held.lost.wait(TTL * 6)
            assert held.renewal is not None
            _renewed_then_given_up(time.monotonic() - started, held.renewal.renewals)
        for name in ("one", "a", "b"):  # a lock given up is left to expire, within its ttl
            assert gone_within(raw, (key_prefix + name).encode(), TTL + 0.3)


@pytest.mark.parametrize("max_hold", HOLDS)
def test_asyncio(redis_server: RedisServer, key_prefix: str, raw: redis.Redis,
                 max_hold: float | timedelta) -> None:
    async def main() -> None:
        async with AsyncLockClient.from_url(redis_server.url, key_prefix=key_prefix) as client:
            started = time.monotonic()
            lease = await client.try_acquire("one", TTL, auto_renew=AutoRenew(max_hold=max_hold))
            assert lease is not None
            assert await client.wait_lost(lease, TTL * 6)
            assert lease.renewal is not None
            _renewed_then_given_up(time.monotonic() - started, lease.renewal.renewals)

    asyncio.run(main())
    assert gone_within(raw, (key_prefix + "one").encode(), TTL + 0.3)


@pytest.mark.parametrize("max_hold", HOLDS)
def test_redlock(max_hold: float | timedelta) -> None:
    servers = [RedisServer().start() for _ in range(3)]
    try:
        with RedlockClient([server.url for server in servers], key_prefix="hold:") as client:
            started = time.monotonic()
            result = client.acquire("one", TTL, auto_renew=AutoRenew(max_hold=max_hold))
            lease = result.lease
            assert lease is not None
            assert lease.lost.wait(TTL * 6)
            _renewed_then_given_up(time.monotonic() - started, lease.extensions)
        assert all(gone_within(redis.Redis(port=server.port), b"hold:one", TTL + 0.3) for server in servers)
    finally:
        for server in servers:
            server.stop()
