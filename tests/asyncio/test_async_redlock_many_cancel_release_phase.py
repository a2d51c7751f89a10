"""AsyncRedlockClient.acquire_many cancelled while it releases the names that missed the quorum:
the names it did take on every master (whose leases never reach the caller) were left held for
their whole ttl (found in review). README: "a cancelled task leaves no lock behind on any
master". The flow is shared: a KeyboardInterrupt there in the threaded client is the same."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from _netfaults import FaultProxy
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

TTL = 30


def test_acquire_many_cancelled_in_failed_release_leaves_nothing(three: list[RedisServer], raws: Any,
                                                                 core_name: str, key_prefix: str) -> None:
    conns = raws(three)
    other = b"o" * 16
    mine, contested = "mine", "contested"
    for conn in conns[:2]:  # held by someone else on 2 of 3 masters: ours only on the third
        conn.set(key_prefix + contested, other, px=TTL * 1000)

    with FaultProxy(three[0].host, three[0].port) as proxy:
        urls = [proxy.url, three[1].url, three[2].url]

        async def body() -> list[object]:
            async with AsyncRedlockClient(urls, core=core_name, key_prefix=key_prefix) as client:
                await client.query("warm-up")
                proxy.delay(0.3, to_server=False)  # master 0 answers 0.3 s late (chunk timeout 1 s)
                task = asyncio.ensure_future(client.acquire_many([mine, contested], TTL))
                await asyncio.sleep(0.45)  # the acquire is decided; the release of "contested" is in flight
                task.cancel()
                try:
                    result = await task
                except asyncio.CancelledError:
                    result = None
                assert result is None, "the call must still have been running"
                proxy.heal()
                deadline = time.monotonic() + 3.0
                while time.monotonic() < deadline:
                    left = [conn.get(key_prefix + mine) for conn in conns]
                    if left == [None] * 3:
                        break
                    await asyncio.sleep(0.05)
                return left

        left = asyncio.run(body())
    held_on = sum(v is not None for v in left)
    assert left == [None] * 3, f"{mine!r} still held on {held_on} masters 3 s after the cancel"
