"""Helpers for the asyncio tests: loops, a runner that fails on tasks left behind, and waits.

A module of its own (not ``conftest``): test modules import it by this unique name.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any

import redis

from turbolock.asyncio import AsyncLockClient

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None
LOOPS = ["asyncio", "uvloop"] if HAVE_UVLOOP else ["asyncio"]
# Every test body runs under this limit: a call that never returns fails the test instead of hanging it.
TEST_LIMIT = 30.0

Runner = Callable[[Callable[[], Awaitable[Any]]], Any]
NewClient = Callable[..., AsyncLockClient]


def new_loop(name: str) -> asyncio.AbstractEventLoop:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop()  # type: ignore[no-any-return]
    return asyncio.new_event_loop()


def run_in_new_loop(name: str, body: Callable[[], Awaitable[Any]]) -> Any:
    loop = new_loop(name)
    try:
        async def main() -> Any:
            result = await asyncio.wait_for(body(), TEST_LIMIT)
            # Let callbacks the body started (connection_lost, background cleanups) run out.
            for _ in range(5):
                await asyncio.sleep(0)
            me = asyncio.current_task()
            left = [task for task in asyncio.all_tasks() if task is not me and not task.done()]
            assert not left, f"tasks left running: {left}"
            return result

        return loop.run_until_complete(main())
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def keys_left(raw: redis.Redis, prefix: str | bytes) -> list[bytes]:
    prefix = prefix.encode() if isinstance(prefix, str) else prefix
    return list(raw.scan_iter(match=prefix + b"*", count=1000))


async def settle(client: AsyncLockClient, limit: float = 5.0) -> None:
    """Wait until every reply in flight has come back and every maybe-held lock is released."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        # Replies come in order on each connection: once a probe on every one is answered,
        # every earlier reply is in (and every orphaned acquire handed to the cleanup).
        await client.query("settle-probe")
        for conn in client._pool.connections:
            conn.buffer.append_pttl(b"settle-probe")
            await conn.submit(1)
        runner = client._cleanup_runner
        if runner is not None and not runner.done():
            await asyncio.wait([runner], timeout=max(0.0, deadline - loop.time()))
        if client.pending_cleanup == 0:
            return
        if loop.time() > deadline:
            raise AssertionError(f"{client.pending_cleanup} maybe-held locks were never released")
        await asyncio.sleep(0.01)
