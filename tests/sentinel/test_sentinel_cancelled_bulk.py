"""An asyncio bulk acquire, fenced acquire or claim on a Sentinel group cancelled while
the master (SIGSTOPped) has not answered: nothing is left held once it answers again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis

from _cancelling import cancel_after
from _eventually import eventually
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel

TTL = 30


@pytest.mark.parametrize("op", ["plain", "fenced", "claim"])
def test_cancelled_while_master_stopped(own_sentinel_group: Callable[..., RedisSentinel],
                                               core_name: str, key_prefix: str, op: str) -> None:
    group = own_sentinel_group(replicas=0, sentinels=1, down_after=60000)
    master = group.node_at(group.master_port())
    raw = redis.Redis(host=master.host, port=master.port)
    names = [f"s:{i}" for i in range(3000)]
    keys = [(key_prefix + name).encode() for name in names]

    async def body() -> None:
        client = AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name,
                                         key_prefix=key_prefix, timeout=5.0, chunk_size=500)
        try:
            assert (await client.acquire_many(["w"], 1, fenced=True)).acquired
            kwargs = {"fenced": True} if op == "fenced" else {"limit": 2000} if op == "claim" else {}
            master.pause()
            try:
                finished, _ = await cancel_after(client.acquire_many(names, TTL, **kwargs), seconds=0.5)
                assert not finished
            finally:
                master.resume()
            ok = await asyncio.to_thread(eventually, lambda: raw.exists(*keys) == 0, 5.0)
            assert ok, f"{raw.exists(*keys)} locks left held after the cancel"
        finally:
            await client.close()

    try:
        asyncio.run(asyncio.wait_for(body(), 60))
    finally:
        raw.close()
