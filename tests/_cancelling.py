"""Cancelling an asyncio call part-way, as a ``wait_for`` or a task's cancel would."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from turbolock.redis_server import RedisServer


async def cancel_after(coro: Any, iterations: int = 0, seconds: float = 0.0) -> tuple[bool, Any]:
    """Run ``coro`` as a task, cancel it after ``iterations`` loop iterations and ``seconds``:
    (finished, result); (False, None) when the cancel landed."""
    task = asyncio.ensure_future(coro)
    for _ in range(iterations):
        await asyncio.sleep(0)
    if seconds:
        await asyncio.sleep(seconds)
    task.cancel()
    try:
        return True, await task
    except asyncio.CancelledError:
        return False, None


def cancelled_bulk_leaves_nothing(make: Callable[[], Any], names: list[str], master: RedisServer,
                                  key_prefix: str, stall: Callable[[], None], unstall: Callable[[], None],
                                  cancel_after_seconds: float = 0.4) -> int:
    """``make()``'s asyncio acquire_many of ``names`` (60 s ttl) cancelled ``cancel_after_seconds``
    after ``stall()`` (which holds its last replies back; ``unstall()`` undoes it), once some
    locks were taken on ``master``: how many of them are still held 5 s later (0: all released).
    Every key under ``key_prefix`` on ``master`` counts (a Redis Cluster node refuses a multi-key
    EXISTS across slots)."""
    raw = redis.Redis(host=master.host, port=master.port)

    def held() -> int:
        return sum(1 for _ in raw.scan_iter(match=key_prefix + "*", count=10_000))

    async def body() -> int:
        client = make()
        try:
            assert (await client.query_many(names[:1]))[0].held is False  # connections in place
            stall()
            try:
                task = asyncio.ensure_future(client.acquire_many(names, 60))
                await asyncio.sleep(cancel_after_seconds)
                assert not task.done(), "the call ended before the cancel: the test proves nothing"
                assert held(), "nothing was taken before the cancel: the test proves nothing"
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                unstall()
            await asyncio.to_thread(eventually, lambda: held() == 0, 5.0)
            return held()
        finally:
            await client.close()

    try:
        return asyncio.run(asyncio.wait_for(body(), 60))
    finally:
        raw.close()
