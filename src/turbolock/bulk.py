"""The bulk API: acquire, extend, release and query thousands of independent locks in one call.

Every input is checked before anything is sent. Commands are pipelined over one connection in
chunks; results come back one per name, in input order. A lock is reported acquired only on a
reply that says so: names whose replies were lost are released with their tokens (now, or once
the server answers again) and listed in the error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from . import _scripts
from ._bulk_plan import (
    MAX_BULK,
    AcquirePlan,
    check_leases,
    check_size,
    check_tokens,
    encode_unique_names,
    extending,
    flag,
    pttl_encoder,
    script_encoders,
    settle_extend,
    settle_query,
    settle_release,
)
from ._validate import Seconds, ttl_ms
from .errors import AcquireOutcomeUnknownError, InvalidArgumentError, InvalidArgumentTypeError
from .lease import Lease, LockInfo, commands_unknown

if TYPE_CHECKING:
    from .client import LockClient

__all__ = ["MAX_BULK", "AcquireManyResult", "acquire_many", "extend_many", "query_many", "release_many"]

# Older private names, still imported elsewhere in the package.
_check_size = check_size
_check_tokens = check_tokens
_encode_names = encode_unique_names
_flag = flag


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


def acquire_many(client: LockClient, names: Sequence[str | bytes], ttl: Seconds, all_or_nothing: bool,
                 tokens: Sequence[bytes] | None = None) -> AcquireManyResult:
    plan = AcquirePlan(names, ttl_ms(ttl), tokens, client._owner)
    plan.sent_at = time.monotonic()
    replies = client._exec.many(plan.count, plan.encode, on_replies=plan.on_replies)
    if plan.handled < plan.count:
        _raise_lost(client, plan, replies, all_or_nothing)
    if plan.errors:
        taken = plan.taken()
        if taken:
            client.release_many(taken)
        raise plan.first_error(replies)
    if all_or_nothing and plan.not_acquired:
        client.release_many(plan.taken())
        return AcquireManyResult(plan.names, [None] * plan.count, plan.not_acquired)
    return AcquireManyResult(plan.names, plan.leases, plan.not_acquired)


def _raise_lost(client: LockClient, plan: AcquirePlan, replies: list[object], all_or_nothing: bool) -> None:
    acquired = plan.taken()
    if all_or_nothing:
        forget_at = time.monotonic() + plan.ttl_ms / 1000.0
        for lease in acquired:
            client._remember_cleanup(lease.key, lease.token, forget_at)
        acquired = []
    error = client._acquire_lost(plan.maybe_held(replies), ConnectionError("the connection failed mid-batch"))
    if isinstance(error, AcquireOutcomeUnknownError):
        error.acquired = acquired
        error.not_sent = plan.not_sent(replies)
    raise error


def run_release(client: LockClient, keys: list[bytes], tokens: list[bytes],
                deadline: float = math.inf) -> list[object]:
    """Release by key and token, pipelined; the raw replies (1, 0, errors, UNKNOWN, NOT_SENT)."""
    encode, reencode = script_encoders(_scripts.RELEASE, keys, tokens, None)
    return client._exec.many(len(keys), encode, _scripts.RELEASE, reencode, deadline=deadline)


def release_many(client: LockClient, leases: Sequence[Lease], deadline: float = math.inf) -> list[bool]:
    keys, tokens = check_leases(client, leases)
    renewed = [lease for lease in leases if lease.renewal is not None]
    if renewed:
        client._renewer().remove(renewed)
    replies = run_release(client, keys, tokens, deadline)
    return settle_release(client, leases, replies)


def extend_many(client: LockClient, leases: Sequence[Lease], ttl: Seconds) -> list[bool]:
    keys, tokens = check_leases(client, leases)
    ms = ttl_ms(ttl)
    encode, reencode = script_encoders(_scripts.EXTEND, keys, tokens, ms)
    sent_at = time.monotonic()
    extending(leases, ms, sent_at)
    try:
        replies = client._exec.many(len(leases), encode, _scripts.EXTEND, reencode)
    except BaseException:
        commands_unknown(leases, sent_at)  # interrupted, perhaps after some were sent
        raise
    return settle_extend(client, leases, replies, ms, sent_at)


def query_many(client: LockClient, names: Sequence[str | bytes]) -> list[LockInfo]:
    keys = encode_unique_names(names)
    replies = client._exec.many(len(keys), pttl_encoder(keys))
    return settle_query(names, replies)
