"""A client closed while its first call is opening a connection (the call cancelled first, or
not; a blocking acquire's subscriber connecting too) leaves no connection open: one whose
connect finished just as ``close()`` cancelled it was kept open, unreferenced, until the event
loop itself closed (11-57 of 200 such clients in the review's runs), each a server client slot
towards ``maxclients`` in a service that makes a client per job. Swept over delays so the close
lands at each step of the connect."""

from __future__ import annotations

import asyncio
from typing import Any

import redis
from async_helpers import NewClient, Runner

from turbolock import ConnectionError

DELAYS = [0.0, 2e-5, 5e-5, 7.5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3]


async def _left_open(raw: redis.Redis, before: int) -> int:
    """Connections more than ``before`` once the closes have had time to reach the server."""
    await asyncio.sleep(0.3)
    return len(raw.client_list()) - before


async def _cancel_after(awaitable: Any, seconds: float) -> None:
    task = asyncio.ensure_future(awaitable)
    await asyncio.sleep(seconds)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


def test_close_while_the_first_call_connects_leaves_no_connection(arun: Runner, new_client: NewClient,
                                                                   raw: redis.Redis) -> None:
    async def body() -> None:
        before = len(raw.client_list())
        for i in range(120):
            client = new_client()
            call = asyncio.ensure_future(client.try_acquire(f"connecting:{i}", 10))
            await asyncio.sleep(DELAYS[i % len(DELAYS)])
            if i % 16 >= 8:
                call.cancel()  # the caller gave up first: its connect goes on, shielded
                await asyncio.sleep(0)
            await client.close()
            try:
                lease = await call
            except (ConnectionError, asyncio.CancelledError):
                pass
            else:
                assert lease is not None  # taken before the close: it expires by its ttl
        left = await _left_open(raw, before)
        assert left <= 0, f"{left} connections left open by 120 closed clients"

    arun(body)


def test_cancelled_calls_then_close_leave_no_connection(arun: Runner, new_client: NewClient,
                                                        raw: redis.Redis) -> None:
    async def body() -> None:
        before = len(raw.client_list())
        for i in range(200):
            client = new_client()
            delay = DELAYS[i % len(DELAYS)] * 4
            if i % 3 == 2:  # a blocking acquire of a held lock opens a subscriber connection too
                held = await client.try_acquire("contended", 10) if i == 2 else None
                await _cancel_after(client.lock("contended", 10, timeout=1).acquire(), delay)
                if held is not None:
                    await client.release(held)
            else:
                await _cancel_after(client.try_acquire(f"cancelled:{i}", 10), delay)
            if i % 2:
                closing = asyncio.ensure_future(client.close())
                await asyncio.sleep(0)
                await closing
            else:
                await client.close()
        left = await _left_open(raw, before)
        assert left <= 0, f"{left} connections left open by 200 closed clients"

    arun(body)
