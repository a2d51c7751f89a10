"""A fair Lock object's attempts and its leaving the queue (``_wire/fair_scripts``), for the
threaded and the asyncio clients alike: each client runs these under its own deadline rules
(``_fair_attempt``, ``_fair_leave``)."""

from __future__ import annotations

import time
from typing import Any

from turbolock._flows.renewal_book import AutoRenew, OnLost
from turbolock._flows.single import acquire_result
from turbolock._flows.steps import Call, Flow
from turbolock._wire.fair_scripts import FAIR_ACQUIRE, FAIR_LEAVE
from turbolock._wire.outcomes import Unconfirmed
from turbolock._wire.validate import Seconds, encode_name, ttl_ms
from turbolock.lease import Lease

REPLY_LOST = object()
"""A waiting attempt's reply was lost: it may have taken the lock, which its next attempt then
finds its own (``fair_scripts``); nothing is released in the background meanwhile, or the waiter
would lose its turn."""

LEAVE_SECONDS = 0.02
"""How long a waiter that gives up waits for its leaving the queue; past that, its place is
dropped by the others once it reaches the head (``fair_scripts.PATIENCE_MS``)."""


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
        reply = yield Call(client._exec.script_one, (FAIR_ACQUIRE[queue, fenced], key, token, ms, deadline))
    except Unconfirmed as exc:
        if queue and isinstance(exc.cause, Exception):
            return REPLY_LOST
        raise client._acquire_lost([(name, key, token, time.monotonic() + ms / 1000.0)], exc.cause) from None
    if type(reply) is int and reply < 0:
        return -reply
    return acquire_result(client, reply, name, key, token, ms, sent_at, policy, on_lost)


def fair_leave_flow(client: Any, name: str | bytes, waiter: bytes, deadline: float) -> Flow[bool]:
    """Leave the queue, and release the lock if an attempt whose reply was lost took it; whether
    the server answered (a place left behind expires by the others' patience)."""
    try:
        reply = yield Call(client._exec.script_one, (FAIR_LEAVE, encode_name(name), waiter, None, deadline))
    except Exception:  # best effort: the caller falls back on the background cleanup
        return False
    return type(reply) is int
