"""Two asyncio calls needing a new connection while the server does not answer (SIGSTOP): call
A opens it at 0 (its deadline T), call B at 0.8 waits for that connect; the server answers again
at 2.3, before B's deadline (2.8). A fails; B must succeed: the connect it shared failed by A's
deadline, not B's. (B failed with A's error at 2.0: found in review.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

T = 2.0
B_STARTS = 0.8
RESUME_AT = 2.3


async def call_after_a_shared_connect_failed(client: Any, server: Any) -> tuple[object, object]:
    """(A's outcome, B's), ``client`` having just lost its connection to ``server``, paused."""
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
