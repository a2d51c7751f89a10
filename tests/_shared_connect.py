"""Two asyncio calls needing a new connection while the server does not answer (SIGSTOP): call
A opens it at 0 (its deadline T), call B at 0.8 waits for that connect; the server answers again
at 2.3, before B's deadline (2.8). A fails; B must succeed: the connect it shared failed by A's
deadline, not B's. (B failed with A's error at 2.0: found in review.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from turbolock import Lease, LockError

T = 2.0
B_STARTS = 0.8
RESUME_AT = 2.3


async def a_shared_connect_fails(client: Any, server: Any) -> None:
    """``client`` (warmed up) loses its connection to ``server``, left paused; then A and B call,
    and ``server`` answers again between A's deadline and B's."""
    try:
        assert await client.try_acquire("warm-up", 30) is not None
        server.pause()
        with pytest.raises(LockError):  # times out: the connection dropped (Sentinel: the master forgotten)
            await client.try_acquire("first", 30)
        a, b = await _two_calls(client, server)
    finally:
        server.resume()
        await client.close()
    assert isinstance(a, LockError), a
    assert isinstance(b, Lease), f"B ended with {b!r} with 0.5 s of its own left"


async def _two_calls(client: Any, server: Any) -> tuple[object, object]:
    timer = threading.Timer(RESUME_AT, server.resume)
    timer.start()
    try:
        a = asyncio.ensure_future(client.try_acquire("a", 30))
        await asyncio.sleep(B_STARTS)
        try:
            b: object = await client.try_acquire("b", 30)
        except Exception as exc:  # what B ends with is what is checked
            b = exc
        (a_outcome,) = await asyncio.gather(a, return_exceptions=True)
    finally:
        timer.join()
        server.resume()
    return a_outcome, b
