"""A connect or call timeout longer than a year is refused when the client is made, naming the
argument: the threaded client took 1e19 s and every call failed with a raw ``struct.error``
(packing SO_RCVTIMEO), 1e12 s with ``OverflowError`` (socket and thread waits), after opening a
connection. Up to a year both front ends work. Found in review."""

from __future__ import annotations

import asyncio

import pytest

from turbolock import InvalidArgumentError, LockClient, RedlockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

YEAR = 365 * 24 * 3600


@pytest.mark.parametrize("argument", ["timeout", "connect_timeout", "replicas_timeout"])
@pytest.mark.parametrize("seconds", [YEAR + 1, 1e12, 1e19])
def test_a_timeout_over_a_year_is_refused(redis_server: RedisServer, argument: str, seconds: float) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        LockClient.from_url(redis_server.url, **{argument: seconds})
    assert caught.value.argument == argument
    with pytest.raises(InvalidArgumentError) as caught:
        AsyncLockClient.from_url(redis_server.url, **{argument: seconds})
    assert caught.value.argument == argument


def test_a_redlock_node_timeout_over_a_year_is_refused(redis_server: RedisServer) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        RedlockClient([redis_server.url], node_timeout=1e12)
    assert caught.value.argument == "node_timeout"


def test_a_timeout_of_a_year_works_on_both_front_ends(redis_server: RedisServer, core_name: str,
                                                       key_prefix: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix, timeout=YEAR,
                             connect_timeout=YEAR) as client:
        lease = client.try_acquire("year", 10)
        assert lease is not None and client.query("year").held and client.release(lease)

    async def main() -> None:
        client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                                          timeout=YEAR, connect_timeout=YEAR)
        try:
            lease = await client.try_acquire("year", 10)
            assert lease is not None and await client.release(lease)
        finally:
            await client.close()

    asyncio.run(main())
