"""Worker bodies of the waking scenarios (one process each, started by the forkserver)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis

from turbolock import LockClient
from turbolock.asyncio import AsyncLockClient

WAIT_LIMIT = 60.0


def many_waiters(index: int, url: str, core: str, prefix: str, tasks: int, counter: str,
                 start: Any) -> dict[str, Any]:
    """``tasks`` asyncio tasks of one client, each waiting once for the one lock, then a
    read-modify-write of ``counter`` under it (an overlap would lose an increment)."""

    async def main() -> dict[str, Any]:
        data = redis.Redis.from_url(url)
        async with AsyncLockClient.from_url(url, core=core, key_prefix=prefix, timeout=10.0) as client:
            async def one() -> None:
                lock = client.lock("crowd", 10, timeout=WAIT_LIMIT)
                if not await lock.acquire():
                    raise AssertionError("a waiter never got the lock")
                try:
                    value = int(data.get(counter) or 0)
                    await asyncio.sleep(0)
                    data.set(counter, value + 1)
                finally:
                    await lock.release()

            start.wait(timeout=WAIT_LIMIT)
            await asyncio.gather(*(one() for _ in range(tasks)))
            waker = client._waker_instance
            report = {"connects": waker.connects if waker else 0,
                      "tickets_left": waker.book.waiting if waker else 0}
        data.close()
        return report

    return asyncio.run(main())


def handoff_loop(index: int, url: str, core: str, prefix: str, seconds: float, wake: bool,
                 start: Any) -> list[tuple[int, float]]:
    """Take the lock, hold it 0.5 ms, give it back, again and again for ``seconds``; the
    times this worker had it."""
    taken: list[tuple[int, float]] = []
    with LockClient.from_url(url, core=core, key_prefix=prefix, wake_waiters=wake) as client:
        lock = client.lock("turns", 10, timeout=WAIT_LIMIT)
        start.wait(timeout=WAIT_LIMIT)
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            if not lock.acquire():
                raise AssertionError("the lock was never free")
            taken.append((index, time.monotonic()))
            time.sleep(0.0005)
            lock.release()
    return taken
