"""An asyncio task cancelled in a bulk call on an AsyncSentinelLockClient says nothing of the
master: another task's acquire in flight on the connection every task shares still gets its
answer, as on the plain AsyncLockClient (the control). Found in review: the cancel was taken for
a master failure, the healthy master forgotten and the shared connection aborted, the other
task's acquire ending in AcquireOutcomeUnknownError."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from turbolock.asyncio import AsyncLockClient, AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel

NAMES = [f"bulk:{i}" for i in range(20000)]


@pytest.mark.parametrize("kind", ["sentinel", "plain"])
def test_a_cancelled_bulk_call_leaves_other_tasks_alone(sentinel_group: RedisSentinel, core_name: str,
                                                         key_prefix: str, kind: str) -> None:
    async def body() -> None:
        if kind == "sentinel":
            client: Any = AsyncSentinelLockClient(sentinel_group.sentinel_urls, sentinel_group.service,
                                                  core=core_name, key_prefix=key_prefix)
        else:
            client = AsyncLockClient("127.0.0.1", sentinel_group.master_port(), core=core_name,
                                     key_prefix=key_prefix)
        async with client:
            assert (await client.query("warm-up")).held is False
            bulk = asyncio.ensure_future(client.acquire_many(NAMES, 30))
            for _ in range(3):
                await asyncio.sleep(0)  # the bulk call's first chunks go out
            other = asyncio.ensure_future(client.try_acquire("other", 30))  # behind them, same connection
            await asyncio.sleep(0)
            bulk.cancel()
            await asyncio.wait([bulk])
            lease = await other  # AcquireOutcomeUnknownError on the Sentinel client
            assert lease is not None
            assert await client.release(lease)

    asyncio.run(asyncio.wait_for(body(), 60))
