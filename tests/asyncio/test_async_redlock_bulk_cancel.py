"""AsyncRedlockClient bulk calls (acquire_many, a claim, release_many) cancelled while one of
three masters is SIGSTOPped: once it answers again nothing is left held on any master."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from async_helpers import Runner

from _raw import Raws
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

MakeRedlock = Callable[..., AsyncRedlockClient]
OwnMasters = Callable[[int], list[RedisServer]]
TTL = 30
CLEANUP_LIMIT = 5.0


def _left(connections: list[redis.Redis], prefix: str) -> dict[int, int]:
    return {i: len(list(raw.scan_iter(match=prefix + "*", count=1000))) for i, raw in enumerate(connections)}


@pytest.mark.parametrize("stop", [True, False], ids=["stopped", "all-up"])
@pytest.mark.parametrize("op", ["acquire_many", "claim", "release_many"])
@pytest.mark.parametrize("after", [0.0, 0.02, 0.15, 0.35])
def test_cancelled_bulk_with_a_stopped_master_leaves_nothing(
        arun_asyncio: Runner, own_masters: OwnMasters, make_async_redlock: MakeRedlock, raws: Raws,
        key_prefix: str, op: str, after: float, stop: bool) -> None:
    servers = own_masters(3)
    connections = raws(servers)

    async def body() -> None:
        async with make_async_redlock(servers, chunk_size=20, timeout=0.3, connect_timeout=0.3) as client:
            warm = await client.acquire_many(["warm:0", "warm:1"], TTL)
            assert await client.release_many(warm.acquired) == [True, True]
            names = [f"job:{i}" for i in range(100)]
            leases: list[Any] = []
            if op == "release_many":
                leases = (await client.acquire_many(names, TTL)).acquired
                assert len(leases) == 100
            if stop:
                servers[1].pause()
            try:
                if op == "acquire_many":
                    task = asyncio.ensure_future(client.acquire_many(names, TTL))
                elif op == "claim":
                    task = asyncio.ensure_future(client.acquire_many(names, TTL, limit=40))
                else:
                    task = asyncio.ensure_future(client.release_many(leases))
                await asyncio.sleep(after)
                task.cancel()
                try:
                    result = await task
                except asyncio.CancelledError:
                    result = None
                except Exception as exc:
                    result = exc
                if result is not None and not isinstance(result, Exception) and op != "release_many":
                    assert await client.release_many(result.acquired) == [True] * len(result.acquired)
            finally:
                if stop:
                    servers[1].resume()
            deadline = time.monotonic() + CLEANUP_LIMIT
            while any(_left(connections, key_prefix).values()):
                if time.monotonic() > deadline:
                    left = _left(connections, key_prefix)
                    raise AssertionError(f"{op} (stopped master: {stop}) cancelled after {after}s "
                                         f"({result!r}): keys left per master {left} "
                                         f"{CLEANUP_LIMIT}s after resume")
                await asyncio.sleep(0.05)

    arun_asyncio(body)
