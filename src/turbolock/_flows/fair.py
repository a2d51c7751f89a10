"""A fair Lock object's attempts and its leaving the queue (``_wire/fair_scripts``), for the
threaded and the asyncio clients alike: each client runs an attempt under its own deadline rules
(``_fair_attempt``); leaving goes through the client's background cleanup (``Leaving``,
``cleanup_flows``), so that no wait ends later for it."""

from __future__ import annotations

import math
import time
from typing import Any

from turbolock import _metrics
from turbolock._flows.bulk_plan import script_encoders
from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._flows.single import acquire_result
from turbolock._flows.steps import Call, Flow
from turbolock._wire.fair_scripts import FAIR_LEAVE
from turbolock._wire.outcomes import Unconfirmed
from turbolock._wire.validate import Seconds, encode_name, ttl_ms
from turbolock.lease import Lease

REPLY_LOST = object()
"""A waiting attempt's reply was lost: it may have taken the lock, which its next attempt then
finds its own (``fair_scripts``); nothing is released in the background meanwhile, or the waiter
would lose its turn."""


class Leaving(bytes):
    """A waiter that gave up, as an entry of the client's cleanup (in place of a token): the
    cleanup sends ``FAIR_LEAVE`` for it (``cleanup_flows``) until the server answers."""

    __slots__ = ()


def attempt_token(waiter: bytes, attempt: int) -> bytes:
    """The token of a fair waiter's ``attempt``-th attempt: the waiter, then the attempt's number
    (each attempt's own, so that the release of one whose reply was lost spares the next)."""
    return waiter + attempt.to_bytes(4, "big")


def fair_attempt_flow(client: Any, name: str | bytes, ttl: Seconds, waiter: bytes, attempt: int,
                      auto_renew: bool | AutoRenew, on_lost: OnLost | None, fenced: bool, queue: bool,
                      deadline: float | None) -> Flow[Lease | int | object | None]:
    """One attempt: the lease when the lock was free and nobody was ahead (or already the
    waiter's own), else the waiter's place in the queue (``queue``) or None (a lone try);
    ``REPLY_LOST`` when a waiting attempt's reply was lost."""
    key = encode_name(name)
    ms = ttl_ms(ttl)
    token = attempt_token(waiter, attempt)
    policy = client._renew_policy(auto_renew, on_lost, ms)
    sent_at = time.monotonic()
    try:
        script = client._fair_acquire[queue, fenced]
        reply = yield Call(client._exec.script_one, (script, key, token, ms, deadline))
    except Unconfirmed as exc:
        if queue and isinstance(exc.cause, Exception):
            return REPLY_LOST
        raise client._acquire_lost([(name, key, token, time.monotonic() + ms / 1000.0)], exc.cause) from None
    if type(reply) is int and reply < 0:  # held, or others ahead: a place in the queue
        sink = _metrics.sink
        if sink is not None:  # a contended attempt, as acquire_result counts a plain one
            sink.acquired(0, 1, time.monotonic() - sent_at, "acquire", name)
        return -reply
    return acquire_result(client, reply, name, key, token, ms, sent_at, policy, on_lost)


def leave_flow(client: Any, keys: list[bytes], waiters: list[bytes],
               deadline: float = math.inf) -> Flow[list[object]]:
    """Waiters leave their queues (and release a lock an unanswered attempt of theirs took),
    pipelined; a reply per waiter (an int once it ran)."""
    encode, reencode = script_encoders(FAIR_LEAVE, keys, waiters, None)
    options: dict[str, Any] = {"keys": keys}
    if deadline != math.inf:
        options["deadline"] = deadline
    replies: list[object] = yield Call(client._exec.many, (len(keys), encode, FAIR_LEAVE, reencode), options)
    return replies
