"""What the client's background cleanup sends (``cleanup_book``), for the threaded and the asyncio
clients alike: the releases of maybe-held locks, and the fair waiters that gave up leaving their
queues (``fair.Leaving`` entries), a reply per entry."""

from __future__ import annotations

import math
from typing import Any

from turbolock._flows.bulk_flows import run_release_flow
from turbolock._flows.cleanup_book import IN_FLIGHT
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


def owed_release_flow(client: Any, key: bytes, token: bytes, deadline: float) -> Flow[bool]:
    """Before an attempt that reuses its token (a Lock object given one tries with it again and
    again): a release this client owes for ``key`` with that token (an earlier attempt's reply
    was lost) is made first, as the cleanup would have, so it cannot delete the lock a later
    attempt takes. True when the attempt may go; False while such a release is on its way or
    got no answer (the attempt is then "not acquired yet", and the release stays owed)."""
    forget_at = client._cleanup.claim(key, token)
    if forget_at is None:
        return True
    if forget_at == IN_FLIGHT:
        return False
    released = False
    try:
        (reply,) = yield from run_release_flow(client, [key], [token], deadline)
        released = type(reply) is int
    finally:
        client._cleanup.settle([(key, token, forget_at)], [0])  # no longer on its way
        if not released:
            client._remember_cleanup(key, token, forget_at)  # owed still, the cleanup woken
    return released
