"""``from_redis`` of a redis-py client made by ``Sentinel.master_for()``: its
``SentinelConnectionPool`` keeps no host or port (it asks the Sentinels for each connection),
and the lock client fell back to 127.0.0.1:6379, where it would have sent the master's password
to whatever listens there (found in review). It is refused, naming the argument and pointing to
SentinelLockClient, before anything is sent (no Sentinel is even reached: the pool is lazy)."""

from __future__ import annotations

import asyncio

import pytest
import redis.sentinel

from turbolock import InvalidArgumentError, LockClient
from turbolock.asyncio import AsyncLockClient


def _sentinel_master() -> redis.Redis:
    sentinel = redis.sentinel.Sentinel([("127.0.0.1", 1)], socket_timeout=1)
    return sentinel.master_for("svc", password="master-pw")


def test_threads() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        LockClient.from_redis(_sentinel_master())
    assert caught.value.argument == "client" and "SentinelLockClient" in str(caught.value)
    assert "master-pw" not in str(caught.value)


def test_asyncio() -> None:
    async def main() -> None:
        with pytest.raises(InvalidArgumentError) as caught:
            AsyncLockClient.from_redis(_sentinel_master())
        assert caught.value.argument == "client" and "SentinelLockClient" in str(caught.value)

    asyncio.run(main())


def test_a_plain_redis_py_client_is_still_taken_over() -> None:
    client = LockClient.from_redis(redis.Redis(host="127.0.0.1", port=12345, db=2))
    try:
        assert client.options.port == 12345 and client.options.db == 2
    finally:
        client.close()
