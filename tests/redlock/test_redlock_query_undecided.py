"""query() and check() tell "free" / "not ours" only when the masters that did not answer could
not make a quorum either (found in review). A lock held on masters 0 and 1 of 3, master 2 without
its key (restarted without persistence), master 0 paused: two masters answer, one has the key,
and the silent one may have it too (it does). query() said FREE, check() None and a Lock's
owned() False while the lease had 10 s of validity left; now each raises QuorumError, as an
extend there does. With master 1 gone too, the silent master alone cannot make a quorum: FREE."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis

from turbolock import QuorumError, RedlockClient
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

TTL = 10


def _forget(server: RedisServer, key: str) -> None:
    raw = redis.Redis(host=server.host, port=server.port)
    raw.delete(key)
    raw.close()


def test_threaded_query_and_check_undecided_with_a_master_silent(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)
    with RedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                       node_timeout=0.05) as client:
        lease = client.try_acquire("q", TTL)
        lock = client.lock("q2", TTL)
        assert lease is not None and lock.acquire(blocking=False)
        for name in ("q", "q2"):
            _forget(servers[2], key_prefix + name)
        servers[0].pause()
        try:
            assert lease.valid_for() > 9
            with pytest.raises(QuorumError, match="undecided"):
                client.query("q")
            with pytest.raises(QuorumError, match="undecided"):
                client.check(lease)
            with pytest.raises(QuorumError, match="undecided"):
                lock.owned()
            _forget(servers[1], key_prefix + "q")  # now only the silent master may have it
            assert not client.query("q").held
            assert client.check(lease) is None
        finally:
            servers[0].resume()
        assert client.query("q2").held and lock.owned()  # all answering: held on masters 0 and 1


def test_asyncio_query_and_check_undecided_with_a_master_silent(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)

    async def body() -> None:
        async with AsyncRedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                                      node_timeout=0.05) as client:
            lease = await client.try_acquire("q", TTL)
            assert lease is not None
            _forget(servers[2], key_prefix + "q")
            servers[0].pause()
            try:
                with pytest.raises(QuorumError, match="undecided"):
                    await client.query("q")
                with pytest.raises(QuorumError, match="undecided"):
                    await client.check(lease)
                _forget(servers[1], key_prefix + "q")
                assert not (await client.query("q")).held
                assert await client.check(lease) is None
            finally:
                servers[0].resume()

    asyncio.run(body())
