"""The bulk API for asyncio: the blocking ``bulk`` module's checks, chunking and results, awaited.

A task cancelled mid-call leaves nothing held: leases already taken, and locks that chunks
still in flight take, are released with their tokens in the background.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import _scripts
from .._bulk_plan import (
    AcquirePlan,
    check_leases,
    encode_unique_names,
    extending,
    pttl_encoder,
    script_encoders,
    settle_extend,
    settle_query,
    settle_release,
)
from .._validate import Seconds, ttl_ms
from ..bulk import AcquireManyResult
from ..errors import AcquireOutcomeUnknownError, ConnectionError
from ..lease import Lease, LockInfo, commands_unknown

if TYPE_CHECKING:
    from .client import AsyncLockClient


async def acquire_many(client: AsyncLockClient, names: Sequence[str | bytes], ttl: Seconds,
                       all_or_nothing: bool, tokens: Sequence[bytes] | None = None) -> AcquireManyResult:
    plan = AcquirePlan(names, ttl_ms(ttl), tokens, client._owner)

    def orphans(start: int, stop: int) -> Any:
        return plan.keys[start:stop], plan.tokens[start:stop], plan.ttl_ms

    plan.sent_at = time.monotonic()
    try:
        replies = await client._exec.many(plan.count, plan.encode, on_replies=plan.on_replies,
                                          orphans=orphans)
    except BaseException:
        # Cancelled: the leases taken so far will never reach the caller.
        _forget(client, plan.taken())
        raise
    if plan.handled < plan.count:
        await _raise_lost(client, plan, replies, all_or_nothing)
    if plan.errors:
        taken = plan.taken()
        if taken:
            await client.release_many(taken)
        raise plan.first_error(replies)
    if all_or_nothing and plan.not_acquired:
        await client.release_many(plan.taken())
        return AcquireManyResult(plan.names, [None] * plan.count, plan.not_acquired)
    return AcquireManyResult(plan.names, plan.leases, plan.not_acquired)


def _forget(client: AsyncLockClient, leases: Sequence[Lease]) -> None:
    """Leave ``leases`` to the background cleanup: released with their tokens soon."""
    now = time.monotonic()
    for lease in leases:
        client._remember_cleanup(lease.key, lease.token, now + lease.ttl_ms / 1000.0)


async def _raise_lost(client: AsyncLockClient, plan: AcquirePlan, replies: list[object],
                      all_or_nothing: bool) -> None:
    acquired = plan.taken()
    if all_or_nothing:
        _forget(client, acquired)
        acquired = []
    cause = ConnectionError("the connection failed mid-batch")
    error = client._acquire_lost(plan.maybe_held(replies), cause)
    if isinstance(error, AcquireOutcomeUnknownError):
        error.acquired = acquired
        error.not_sent = plan.not_sent(replies)
    raise error


async def run_release(client: AsyncLockClient, keys: list[bytes], tokens: list[bytes],
                      confirmed: list[bool] | None = None) -> list[object]:
    """Release by key and token, pipelined; the raw replies (1, 0, errors, UNKNOWN, NOT_SENT).
    ``confirmed[i]`` turns True as soon as item i's release is known to have run."""
    encode, reencode = script_encoders(_scripts.RELEASE, keys, tokens, None)

    def on_replies(start: int, replies: list[object]) -> None:
        assert confirmed is not None
        for i, reply in enumerate(replies, start):
            confirmed[i] = type(reply) is int

    return await client._exec.many(len(keys), encode, _scripts.RELEASE, reencode,
                                   on_replies=on_replies if confirmed is not None else None)


async def release_many(client: AsyncLockClient, leases: Sequence[Lease]) -> list[bool]:
    keys, tokens = check_leases(client, leases)
    renewed = [lease for lease in leases if lease.renewal is not None]
    if renewed:
        client._renewer().remove(renewed)
    confirmed = [False] * len(leases)
    try:
        replies = await run_release(client, keys, tokens, confirmed)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # cancelled: whatever was not confirmed is retried
            _forget(client, [lease for lease, done in zip(leases, confirmed, strict=True) if not done])
        raise
    return settle_release(client, leases, replies)


async def extend_many(client: AsyncLockClient, leases: Sequence[Lease], ttl: Seconds) -> list[bool]:
    keys, tokens = check_leases(client, leases)
    ms = ttl_ms(ttl)
    encode, reencode = script_encoders(_scripts.EXTEND, keys, tokens, ms)
    sent_at = time.monotonic()
    extending(leases, ms, sent_at)
    try:
        replies = await client._exec.many(len(leases), encode, _scripts.EXTEND, reencode)
    except BaseException:
        commands_unknown(leases, sent_at)  # cancelled, perhaps after some were sent
        raise
    return settle_extend(client, leases, replies, ms, sent_at)


async def query_many(client: AsyncLockClient, names: Sequence[str | bytes]) -> list[LockInfo]:
    keys = encode_unique_names(names)
    replies = await client._exec.many(len(keys), pttl_encoder(keys))
    return settle_query(names, replies)
