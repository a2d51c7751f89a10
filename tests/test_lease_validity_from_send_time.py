"""Untested before review: a single-server lease's validity counted from when the reply came
(``Lease(..., time.monotonic(), ...)`` in ``_flows.single.acquire_result``) instead of from
before the SET was sent. No test delays an acquire's reply, so a lease that believes it holds
the lock longer than the server keeps its key passed every test. Here the replies take 400 ms
to come back (a proxy): the lease must not believe more than the server's PTTL."""

from __future__ import annotations

import time

import pytest
import redis

from _netfaults import FaultProxy
from turbolock import LockClient
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("fenced", [False, True], ids=["plain", "fenced"])
def test_a_slow_reply_shortens_the_leases_validity(redis_server: RedisServer, core_name: str,
                                                   key_prefix: str, raw: redis.Redis, fenced: bool) -> None:
    with FaultProxy(redis_server.host, redis_server.port) as proxy, \
            LockClient.from_url(proxy.url, core=core_name, key_prefix=key_prefix, timeout=5) as client:
        assert not client.query("warm").held  # connected before the delay
        proxy.delay(0.4, to_server=False, to_client=True)
        before = time.monotonic()
        lease = client.try_acquire("slow-reply", 1.0, fenced=fenced)
        took = time.monotonic() - before
        believed = lease.valid_for() if lease is not None else None
        proxy.heal()
        assert lease is not None and took >= 0.4
        server_ms = raw.pttl(key_prefix + "slow-reply")
        assert believed is not None and believed * 1000 <= server_ms + 5, (
            f"the lease believes {believed * 1000:.0f} ms, the server keeps the key {server_ms} ms")
        assert believed <= 1.0 - 0.4 + 0.01
        assert client.release(lease)
