"""The bulk API for asyncio: the blocking ``bulk`` module's checks, chunking and results, awaited.

A task cancelled mid-call leaves nothing held: leases already taken, and locks that chunks
still in flight take, are released with their tokens in the background.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import _scripts
from .._executor import NOT_SENT, UNKNOWN
from .._validate import Seconds, ttl_ms
from ..bulk import AcquireManyResult, _check_size, _check_tokens, _encode_names, _flag, _new_tokens
from ..client import _reply_error
from ..errors import AcquireOutcomeUnknownError, ConnectionError, InvalidArgumentError, OutcomeUnknownError
from ..lease import Lease, LockInfo, info_from_pttl

if TYPE_CHECKING:
    from .client import AsyncLockClient


def _check_leases(client: AsyncLockClient, leases: Sequence[Lease]) -> None:
    _check_size(leases, "leases")
    check = client._check_lease
    for lease in leases:
        check(lease, "leases")
    if len({lease.key for lease in leases}) != len(leases):
        raise InvalidArgumentError("leases", "lists one lock more than once")


async def acquire_many(client: AsyncLockClient, names: Sequence[str | bytes], ttl: Seconds,
                       all_or_nothing: bool, tokens: Sequence[bytes] | None = None) -> AcquireManyResult:
    keys = _encode_names(names)
    ms = ttl_ms(ttl)
    names = list(names)
    count = len(keys)
    fresh_tokens = tokens is None
    tokens = [b""] * count if tokens is None else _check_tokens(tokens, count)
    if client._cleanup:
        await client._run_cleanup()

    def encode(buf: Any, start: int, stop: int) -> None:
        if fresh_tokens:
            tokens[start:stop] = _new_tokens(stop - start)
        buf.append_set_nx_px_many(keys[start:stop], tokens[start:stop], ms)

    def orphans(start: int, stop: int) -> Any:
        return keys[start:stop], tokens[start:stop], sent_at + ms / 1000.0

    owner = client._owner
    leases: list[Lease | None] = [None] * count
    not_acquired: list[str | bytes] = []
    errors: list[int] = []
    handled = 0

    def on_replies(start: int, replies: list[object]) -> None:
        nonlocal handled
        for i, reply in enumerate(replies, start):
            if reply == b"OK":
                leases[i] = Lease(names[i], keys[i], tokens[i], ms, sent_at, owner)
            elif reply is None:
                not_acquired.append(names[i])
            else:
                errors.append(i)
        handled = start + len(replies)

    sent_at = time.monotonic()
    try:
        replies = await client._exec.many(count, encode, on_replies=on_replies, orphans=orphans)
    except BaseException:
        # Cancelled: the leases taken so far will never reach the caller.
        _forget(client, [lease for lease in leases if lease is not None])
        raise
    lost = list(range(handled, count))
    if lost:
        await _raise_lost(client, names, keys, tokens, ms, sent_at, replies, lost, leases, all_or_nothing)
    if errors:
        taken = [lease for lease in leases if lease is not None]
        if taken:
            await client.release_many(taken)
        raise _reply_error(replies[errors[0]], names[errors[0]])
    if all_or_nothing and not_acquired:
        await client.release_many([lease for lease in leases if lease is not None])
        leases = [None] * count
    return AcquireManyResult(names, leases, not_acquired)


def _forget(client: AsyncLockClient, leases: Sequence[Lease]) -> None:
    """Leave ``leases`` to the background cleanup: released with their tokens soon."""
    for lease in leases:
        client._remember_cleanup(lease.key, lease.token, lease.expires_at)
    if leases:
        client._schedule_cleanup()


async def _raise_lost(client: AsyncLockClient, names: list[str | bytes], keys: list[bytes],
                      tokens: list[bytes], ms: int, sent_at: float, replies: list[object], lost: list[int],
                      leases: list[Lease | None], all_or_nothing: bool) -> None:
    unknown = [i for i in lost if replies[i] is UNKNOWN]
    not_sent = [names[i] for i in lost if replies[i] is NOT_SENT]
    acquired = [lease for lease in leases if lease is not None]
    if all_or_nothing:
        for lease in acquired:
            client._remember_cleanup(lease.key, lease.token, lease.expires_at)
        acquired = []
    error = await client._acquire_lost(
        [(names[i], keys[i], tokens[i], sent_at + ms / 1000.0) for i in unknown],
        ConnectionError("the connection failed mid-batch"))
    if isinstance(error, AcquireOutcomeUnknownError):
        error.acquired = acquired
        error.not_sent = not_sent
    raise error


async def run_release(client: AsyncLockClient, keys: list[bytes], tokens: list[bytes],
                      confirmed: list[bool] | None = None) -> list[object]:
    """Release by key and token, pipelined; the raw replies (1, 0, errors, UNKNOWN, NOT_SENT).
    ``confirmed[i]`` turns True as soon as item i's release is known to have run."""
    sha = _scripts.RELEASE.sha

    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_evalsha_many(sha, keys[start:stop], tokens[start:stop], None)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        buf.append_evalsha_many(sha, [keys[i] for i in indices], [tokens[i] for i in indices], None)

    def on_replies(start: int, replies: list[object]) -> None:
        assert confirmed is not None
        for i, reply in enumerate(replies, start):
            confirmed[i] = type(reply) is int

    return await client._exec.many(len(keys), encode, _scripts.RELEASE, reencode,
                                   on_replies=on_replies if confirmed is not None else None)


async def release_many(client: AsyncLockClient, leases: Sequence[Lease]) -> list[bool]:
    _check_leases(client, leases)
    renewed = [lease for lease in leases if lease.renewal is not None]
    if renewed:
        client._renewer().remove(renewed)
    keys = [lease.key for lease in leases]
    tokens = [lease.token for lease in leases]
    confirmed = [False] * len(leases)
    try:
        if client._cleanup:
            await client._run_cleanup()
        replies = await run_release(client, keys, tokens, confirmed)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # cancelled: whatever was not confirmed is retried
            _forget(client, [lease for lease, done in zip(leases, confirmed, strict=True) if not done])
        raise
    lost = [i for i, reply in enumerate(replies) if reply is UNKNOWN or reply is NOT_SENT]
    if lost:
        for i in lost:
            lease = leases[i]
            client._remember_cleanup(lease.key, lease.token, lease.expires_at)
        names = [leases[i].name for i in lost]
        raise OutcomeUnknownError(
            f"the connection failed mid-batch: the release of {len(names)} locks is unconfirmed "
            "and will be retried", names)
    return [_flag(reply, lease) for reply, lease in zip(replies, leases, strict=True)]


async def extend_many(client: AsyncLockClient, leases: Sequence[Lease], ttl: Seconds) -> list[bool]:
    _check_leases(client, leases)
    ms = ttl_ms(ttl)
    if client._cleanup:
        await client._run_cleanup()
    keys = [lease.key for lease in leases]
    tokens = [lease.token for lease in leases]
    sha = _scripts.EXTEND.sha

    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_evalsha_many(sha, keys[start:stop], tokens[start:stop], ms)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        buf.append_evalsha_many(sha, [keys[i] for i in indices], [tokens[i] for i in indices], ms)

    sent_at = time.monotonic()
    replies = await client._exec.many(len(keys), encode, _scripts.EXTEND, reencode)
    results = []
    unknown = []
    for reply, lease in zip(replies, leases, strict=True):
        if reply is UNKNOWN or reply is NOT_SENT:
            unknown.append(lease.name)
            results.append(False)
            continue
        extended = _flag(reply, lease)
        if extended:
            lease.ttl_ms = ms
            lease.acquired_at = sent_at
            if lease.renewal is not None:
                client._renewer().rescheduled(lease)
        results.append(extended)
    if unknown:
        raise OutcomeUnknownError(
            f"the connection failed mid-batch: {len(unknown)} extends are unconfirmed", unknown)
    return results


async def query_many(client: AsyncLockClient, names: Sequence[str | bytes]) -> list[LockInfo]:
    keys = _encode_names(names)
    if client._cleanup:
        await client._run_cleanup()

    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_pttl_many(keys[start:stop])

    replies = await client._exec.many(len(keys), encode)
    out = []
    for name, reply in zip(names, replies, strict=True):
        if type(reply) is not int:
            if reply is UNKNOWN or reply is NOT_SENT:
                raise ConnectionError(f"the connection failed mid-batch while querying {name!r}")
            raise _reply_error(reply, name)
        out.append(info_from_pttl(reply))
    return out
