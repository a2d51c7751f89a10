"""What the client's background cleanup sends (``cleanup_book``), for the threaded and the asyncio
clients alike: the releases of maybe-held locks, and the fair waiters that gave up leaving their
queues (``fair.Leaving`` entries), a reply per entry."""

from __future__ import annotations

import math
from typing import Any

from turbolock._flows.bulk_flows import run_release_flow
from turbolock._flows.fair import Leaving, leave_flow
from turbolock._flows.steps import Flow


def cleanup_flow(client: Any, keys: list[bytes], tokens: list[bytes],
                 deadline: float = math.inf) -> Flow[list[object]]:
    """The client's background cleanup: the releases of maybe-held locks, and the waiters that
    gave up (``Leaving`` in place of a token); a reply per entry."""
    leaving = [i for i, token in enumerate(tokens) if type(token) is Leaving]
    if not leaving:
        return (yield from run_release_flow(client, keys, tokens, deadline))
    replies: list[object] = [None] * len(keys)
    releasing = [i for i, token in enumerate(tokens) if type(token) is not Leaving]
    if releasing:
        released = yield from run_release_flow(client, [keys[i] for i in releasing],
                                               [tokens[i] for i in releasing], deadline)
        for i, reply in zip(releasing, released, strict=True):
            replies[i] = reply
    waiters = [bytes(tokens[i]) for i in leaving]
    left = yield from leave_flow(client, [keys[i] for i in leaving], waiters, deadline)
    for i, reply in zip(leaving, left, strict=True):
        replies[i] = reply
    return replies
