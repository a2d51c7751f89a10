"""A bulk call whose deadline passed before anything was written (a Redis Cluster call that
spent its budget reading the slot map, a claim's chunk after a long pause) raises
``UnsentTimeoutError`` on both fronts, sends nothing, and keeps its healthy connection. The
threaded executor used to return every item ``NOT_SENT`` and drop the connection, while the
asyncio one raised: each caller had to tell the two apart, and a threaded claim cut that way
said "the connection failed before the claim was sent"."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from turbolock import LockClient, UnsentTimeoutError
from turbolock._wire.outcomes import item_encoders
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

KEY = b"past-deadline-probe"


def _pttl_calls(raw: redis.Redis) -> int:
    return int(raw.info("commandstats").get("cmdstat_pttl", {}).get("calls", 0))


def _encode() -> Any:
    encode, _ = item_encoders(lambda buf, index: buf.append_pttl(KEY))
    return encode


def test_threads_bulk_call_past_its_deadline_raises_unsent_and_keeps_the_connection(
        redis_server: RedisServer, core_name: str, raw: redis.Redis) -> None:
    with LockClient.from_url(redis_server.url, core=core_name) as client:
        assert client.query("warm-up").held is False  # one connection open and idle
        idle = list(client._pool._idle)
        assert len(idle) == 1
        before = _pttl_calls(raw)
        with pytest.raises(UnsentTimeoutError, match="before anything was sent"):
            client._exec.many(3, _encode(), deadline=time.monotonic() - 0.001)
        assert client._pool._idle == idle  # the same connection, back in the pool
        assert _pttl_calls(raw) == before  # nothing reached the server
        assert client._exec.many(2, _encode(), deadline=time.monotonic() + 5) == [-2, -2]


def test_asyncio_bulk_call_past_its_deadline_raises_unsent_and_keeps_the_connection(
        redis_server: RedisServer, core_name: str, raw: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncLockClient.from_url(redis_server.url, core=core_name) as client:
            assert (await client.query("warm-up")).held is False
            conn = client._pool.ready()
            assert conn is not None
            before = _pttl_calls(raw)
            with pytest.raises(UnsentTimeoutError, match="before anything was sent"):
                await client._exec.many(3, _encode(), deadline=time.monotonic() - 0.001)
            assert client._pool.ready() is conn
            assert _pttl_calls(raw) == before
            assert await client._exec.many(2, _encode(), deadline=time.monotonic() + 5) == [-2, -2]

    asyncio.run(main())


def test_a_late_call_on_a_client_with_no_connection_yet_raises_unsent_on_both_fronts(
        redis_server: RedisServer, core_name: str, raw: redis.Redis) -> None:
    """With no idle connection the call would open one: past its deadline it opens none on
    threads, and asyncio's gives up on the one it starts, both as ``UnsentTimeoutError`` (the
    threaded one raised a plain TimeoutError, which the Cluster flows took for a failed node)."""
    before = _pttl_calls(raw)
    with LockClient.from_url(redis_server.url, core=core_name) as client:
        with pytest.raises(UnsentTimeoutError, match="deadline passed before"):
            client._exec.many(3, _encode(), deadline=time.monotonic() - 0.001)

    async def main() -> None:
        async with AsyncLockClient.from_url(redis_server.url, core=core_name) as client:
            with pytest.raises(UnsentTimeoutError, match="deadline passed before"):
                await client._exec.many(3, _encode(), deadline=time.monotonic() - 0.001)

    asyncio.run(main())
    assert _pttl_calls(raw) == before
