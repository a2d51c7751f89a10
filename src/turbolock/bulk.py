"""The bulk API: acquire, extend, release and query thousands of independent locks in one call.

Every input is checked before anything is sent. Commands are pipelined over one connection in
chunks; results come back one per name, in input order. A lock is reported acquired only on a
reply that says so: names whose replies were lost are released with their tokens (now, or once
the server answers again) and listed in the error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

from . import _scripts
from ._executor import NOT_SENT, UNKNOWN
from ._validate import Seconds, check_token, encode_names, ttl_ms
from .errors import (
    AcquireOutcomeUnknownError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    OutcomeUnknownError,
)
from .lease import Lease, LockInfo, info_from_pttl

if TYPE_CHECKING:
    from .client import LockClient

MAX_BULK = 1_000_000
"""Most names or leases one bulk call takes."""

_TOKEN_BYTES = 16


def check_chunk_size(chunk_size: object) -> int:
    from .client import MAX_CHUNK_SIZE

    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise InvalidArgumentTypeError("chunk_size", "must be an int")
    if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
        raise InvalidArgumentError("chunk_size", f"must be from 1 to {MAX_CHUNK_SIZE}")
    return chunk_size


class AcquireManyResult(Sequence[Lease | None]):
    """One entry per requested name, in input order: its ``Lease``, or None when not acquired.

    ``not_acquired`` lists the names someone else held. With ``all_or_nothing=True`` and any
    name held elsewhere, every entry is None (what was taken was released again) and
    ``all_acquired`` is False.
    """

    __slots__ = ("names", "leases", "not_acquired")

    def __init__(self, names: list[str | bytes], leases: list[Lease | None],
                 not_acquired: list[str | bytes]) -> None:
        self.names = names
        self.leases = leases
        self.not_acquired = not_acquired

    @property
    def acquired(self) -> list[Lease]:
        return [lease for lease in self.leases if lease is not None]

    @property
    def lost(self) -> list[str | bytes]:
        """Names of the leases found lost since (auto-renewed leases are watched)."""
        return [lease.name for lease in self.leases if lease is not None and lease.is_lost]

    @property
    def all_acquired(self) -> bool:
        return not self.not_acquired and all(lease is not None for lease in self.leases)

    def __len__(self) -> int:
        return len(self.leases)

    def __getitem__(self, index: Any) -> Any:
        return self.leases[index]

    def __iter__(self) -> Iterator[Lease | None]:
        return iter(self.leases)

    def __repr__(self) -> str:
        return f"AcquireManyResult(requested={len(self.leases)}, acquired={len(self.acquired)})"


def _check_size(items: Sequence[Any], argument: str) -> None:
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidArgumentTypeError(argument, "must be a sequence (list or tuple)")
    if len(items) > MAX_BULK:
        raise InvalidArgumentError(argument, f"has {len(items)} items; one call takes at most {MAX_BULK}")


def _encode_names(names: Sequence[str | bytes]) -> list[bytes]:
    _check_size(names, "names")
    keys = encode_names(names, "names")
    if len(set(keys)) != len(keys):
        seen: set[bytes] = set()
        for name, key in zip(names, keys, strict=True):
            if key in seen:
                raise InvalidArgumentError("names", f"lists {name!r} more than once")
            seen.add(key)
    return keys


def _check_leases(client: LockClient, leases: Sequence[Lease]) -> None:
    _check_size(leases, "leases")
    check = client._check_lease
    for lease in leases:
        check(lease, "leases")
    if len({lease.key for lease in leases}) != len(leases):
        raise InvalidArgumentError("leases", "lists one lock more than once")


def _new_tokens(count: int) -> list[bytes]:
    blob = os.urandom(_TOKEN_BYTES * count)
    return [blob[i:i + _TOKEN_BYTES] for i in range(0, _TOKEN_BYTES * count, _TOKEN_BYTES)]


def _check_tokens(tokens: Sequence[bytes], count: int) -> list[bytes]:
    _check_size(tokens, "tokens")
    if len(tokens) != count:
        raise InvalidArgumentError("tokens", f"has {len(tokens)} items for {count} names")
    return [check_token(token, "tokens") for token in tokens]


def acquire_many(client: LockClient, names: Sequence[str | bytes], ttl: Seconds, all_or_nothing: bool,
                 tokens: Sequence[bytes] | None = None) -> AcquireManyResult:
    keys = _encode_names(names)
    ms = ttl_ms(ttl)
    names = list(names)
    count = len(keys)
    fresh_tokens = tokens is None
    # Random tokens are made chunk by chunk, while the server works on the previous chunk.
    tokens = [b""] * count if tokens is None else _check_tokens(tokens, count)
    if client._cleanup:
        client._run_cleanup()

    def encode(buf: Any, start: int, stop: int) -> None:
        if fresh_tokens:
            tokens[start:stop] = _new_tokens(stop - start)
        buf.append_set_nx_px_many(keys[start:stop], tokens[start:stop], ms)

    owner = client._owner
    leases: list[Lease | None] = [None] * count
    not_acquired: list[str | bytes] = []
    errors: list[int] = []
    handled = 0

    def on_replies(start: int, replies: list[object]) -> None:
        nonlocal handled
        stop = start + len(replies)
        if replies.count(b"OK") == len(replies):  # the usual case, in C-level loops
            leases[start:stop] = map(Lease, names[start:stop], keys[start:stop], tokens[start:stop],
                                     repeat(ms), repeat(sent_at), repeat(owner))
            handled = stop
            return
        for i, reply in enumerate(replies, start):
            if reply == b"OK":
                leases[i] = Lease(names[i], keys[i], tokens[i], ms, sent_at, owner)
            elif reply is None:
                not_acquired.append(names[i])
            else:
                errors.append(i)
        handled = start + len(replies)

    sent_at = time.monotonic()
    replies = client._exec.many(count, encode, on_replies=on_replies)
    lost = list(range(handled, count))
    if lost:
        _raise_lost(client, names, keys, tokens, ms, sent_at, replies, lost, leases, all_or_nothing)
    if errors:
        taken = [lease for lease in leases if lease is not None]
        if taken:
            client.release_many(taken)
        from .client import _reply_error

        raise _reply_error(replies[errors[0]], names[errors[0]])
    if all_or_nothing and not_acquired:
        client.release_many([lease for lease in leases if lease is not None])
        leases = [None] * count
    return AcquireManyResult(names, leases, not_acquired)


def _raise_lost(client: LockClient, names: list[str | bytes], keys: list[bytes], tokens: list[bytes], ms: int,
                sent_at: float, replies: list[object], lost: list[int], leases: list[Lease | None],
                all_or_nothing: bool) -> None:
    unknown = [i for i in lost if replies[i] is UNKNOWN]
    not_sent = [names[i] for i in lost if replies[i] is NOT_SENT]
    acquired = [lease for lease in leases if lease is not None]
    if all_or_nothing:
        for lease in acquired:
            client._remember_cleanup(lease.key, lease.token, lease.expires_at)
        acquired = []
    error = client._acquire_lost(
        [(names[i], keys[i], tokens[i], sent_at + ms / 1000.0) for i in unknown],
        ConnectionError("the connection failed mid-batch"))
    if isinstance(error, AcquireOutcomeUnknownError):
        error.acquired = acquired
        error.not_sent = not_sent
    raise error


def run_release(client: LockClient, keys: list[bytes], tokens: list[bytes]) -> list[object]:
    """Release by key and token, pipelined; the raw replies (1, 0, errors, UNKNOWN, NOT_SENT)."""
    sha = _scripts.RELEASE.sha

    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_evalsha_many(sha, keys[start:stop], tokens[start:stop], None)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        buf.append_evalsha_many(sha, [keys[i] for i in indices], [tokens[i] for i in indices], None)

    return client._exec.many(len(keys), encode, _scripts.RELEASE, reencode)


def release_many(client: LockClient, leases: Sequence[Lease]) -> list[bool]:
    _check_leases(client, leases)
    renewed = [lease for lease in leases if lease.renewal is not None]
    if renewed:
        client._renewer().remove(renewed)
    if client._cleanup:
        client._run_cleanup()
    keys = [lease.key for lease in leases]
    tokens = [lease.token for lease in leases]
    replies = run_release(client, keys, tokens)
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


def extend_many(client: LockClient, leases: Sequence[Lease], ttl: Seconds) -> list[bool]:
    _check_leases(client, leases)
    ms = ttl_ms(ttl)
    if client._cleanup:
        client._run_cleanup()
    keys = [lease.key for lease in leases]
    tokens = [lease.token for lease in leases]
    sha = _scripts.EXTEND.sha

    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_evalsha_many(sha, keys[start:stop], tokens[start:stop], ms)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        buf.append_evalsha_many(sha, [keys[i] for i in indices], [tokens[i] for i in indices], ms)

    sent_at = time.monotonic()
    replies = client._exec.many(len(keys), encode, _scripts.EXTEND, reencode)
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


def _flag(reply: object, lease: Lease) -> bool:
    if type(reply) is int:
        return reply == 1
    from .client import _reply_error

    raise _reply_error(reply, lease.name)


def query_many(client: LockClient, names: Sequence[str | bytes]) -> list[LockInfo]:
    keys = _encode_names(names)
    if client._cleanup:
        client._run_cleanup()

    def encode(buf: Any, start: int, stop: int) -> None:
        buf.append_pttl_many(keys[start:stop])

    replies = client._exec.many(len(keys), encode)
    out = []
    for name, reply in zip(names, replies, strict=True):
        if type(reply) is not int:
            if reply is UNKNOWN or reply is NOT_SENT:
                from .errors import ConnectionError

                raise ConnectionError(f"the connection failed mid-batch while querying {name!r}")
            from .client import _reply_error

            raise _reply_error(reply, name)
        out.append(info_from_pttl(reply))
    return out
