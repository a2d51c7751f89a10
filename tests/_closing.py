"""An asyncio client's close() begun beside a release in flight: what the tests of a graceful
close (one server, Redis Cluster) look at."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from turbolock.redis_server import RedisServer


@dataclass
class CloseBesideRelease:
    waited: bool
    """Whether close() was still serving (the client closed, close() not done) 0.2 s in."""
    released: object
    """What the release returned, or what it raised."""
    late: object
    """What the call made meanwhile returned or raised (None: no such call)."""
    took: float
    """Seconds close() took."""


async def close_beside_release(client: Any, lease: Any, paused: RedisServer, timeout: float,
                               late: Callable[[], Awaitable[object]] | None = None) -> CloseBesideRelease:
    """``client.release(lease)`` written while ``paused`` does not answer, ``client.close()``
    begun 0.05 s later, and ``late()`` called 0.2 s into close(), before ``paused`` runs again;
    close() must end within ``timeout`` once it does."""
    late_call: asyncio.Future[object] | None = None
    paused.pause()  # the release is written; its reply waits for the server
    try:
        releasing = asyncio.ensure_future(client.release(lease))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        closing = asyncio.ensure_future(client.close())
        await asyncio.sleep(0.2)
        waited = client.closed and not closing.done()
        if late is not None:
            late_call = asyncio.ensure_future(late())
            await asyncio.sleep(0.1)
    finally:
        paused.resume()
    await asyncio.wait_for(closing, timeout)
    took = time.monotonic() - started
    calls = [releasing] if late_call is None else [releasing, late_call]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    return CloseBesideRelease(waited, outcomes[0], outcomes[1] if late_call is not None else None, took)
