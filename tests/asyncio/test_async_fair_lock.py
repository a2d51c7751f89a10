"""asyncio fair Lock objects: a waiting task cancelled leaves the queue at once, so the next
waiter (or a try) is not held up by its place."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis
from async_helpers import Runner

from turbolock._flows.lock_flows import SingleLockFlows
from turbolock.asyncio import AsyncLockClient


def _stay(*_: object) -> Any:
    """``_leave_queue`` that leaves nothing: the fault the control puts in."""
    return
    yield


@pytest.mark.parametrize("control", [False, True], ids=["leaves", "control"])
def test_a_cancelled_fair_waiter_leaves_the_queue(arun: Runner, new_client: Callable[..., AsyncLockClient],
                                                  raw: redis.Redis, monkeypatch: pytest.MonkeyPatch,
                                                  control: bool) -> None:
    if control:  # the fault: a cancelled waiter keeps its place until the others' patience drops it
        monkeypatch.setattr(SingleLockFlows, "_leave_queue", _stay)

    async def body() -> None:
        async with new_client() as client:
            queue = b"{" + client.key_prefix + b"q}:queue"
            holder = client.lock("q", 10, fair=True)
            assert await holder.acquire()
            task = asyncio.ensure_future(client.lock("q", 10, fair=True).acquire(timeout=10))
            for _ in range(500):
                if raw.zcard(queue):
                    break
                await asyncio.sleep(0.01)
            assert raw.zcard(queue) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await holder.release()
            await asyncio.sleep(0.2)  # the leave goes in the background
            if control:
                assert raw.zcard(queue) == 1
                assert not await client.lock("q", 10, fair=True).acquire(blocking=False)
                return
            assert raw.zcard(queue) == 0
            assert await client.lock("q", 10, fair=True).acquire(blocking=False)

    arun(body)
