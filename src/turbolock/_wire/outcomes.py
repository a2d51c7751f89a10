"""What a sent command came to when no reply says so, the shapes of batched commands, and
what a failures-only reply of a multi-key script says: shared by every driver and every flow.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from turbolock._wire import scripts as _scripts
from turbolock.errors import ConnectionError, ReplyError, ResponseError

Encoder = Callable[[Any, int, int], None]
"""Appends the commands for items ``start``..``stop`` to a core CommandBuffer."""
ReplyHandler = Callable[[int, list[object]], None]

WINDOW = 2
"""Chunks of one bulk call in flight on one connection: with one, the client idles while the
server works and the server idles while the client encodes. Redis buffers replies for a normal
client without limit, so a second chunk written before the first one's replies cannot deadlock."""
def bulk_budget(timeout: float, count: int, chunk_size: int) -> float:
    """Seconds a bulk call of ``count`` items may take: a ``timeout`` a chunk (one at the least)."""
    return timeout * max(1, -(-count // chunk_size))


def floored(ends: float, floor: float, deadline: float = math.inf) -> float:
    """``ends``, or ``floor`` seconds from now when that is later, never past ``deadline``: when a
    step must end that is sent even though its call's budget is (nearly) spent (a NOSCRIPT retry,
    a failed acquire's give-back, a read of what was already written)."""
    return min(deadline, max(ends, time.monotonic() + floor))


GIVE_BACK_FLOOR = 0.005
"""Seconds a failed acquire's release (a Redlock attempt's, an all-or-nothing bulk acquire's)
waits for the servers that granted it, at the least, when the call's own budget is (nearly)
spent: a server that answers by then releases at once; one that does not is released in the
background, not on the caller's time."""

RELOAD_FLOOR = 0.005
"""Seconds a Redlock bulk call's NOSCRIPT retry waits at the least, however little of the call's
budget (a timeout a chunk) is left: a master that answers at once is not left out."""

FANOUT_WINDOW = 4
"""Chunks in flight per master in a bulk call. Three servers sharing the client's cores fall
idle more often than one; four chunks measured about 15% faster than two (the single-server
pipeline's window) on a 2-core machine, more gained nothing. Redis buffers replies for a
normal client without limit, so this cannot deadlock."""
Reencoder = Callable[[Any, Sequence[int]], None]
"""Appends the commands for the given item indices: again after NOSCRIPT, or a subset of the
items at once (a Redis Cluster master's share), the same commands ``Encoder`` writes for them."""


class ReplyShape(Protocol):
    """Items that answer several replies each (``transactions.Transactions``): how many items
    ``start``..``stop`` answer, and those replies as one per item."""

    def count(self, start: int, stop: int) -> int: ...

    def fold(self, start: int, stop: int, raw: list[object]) -> list[object]: ...

    def subset(self, indices: Sequence[int]) -> ReplyShape: ...


class DroppedConnectionError(ConnectionError):
    """A call refused, before anything of it was written, by a connection its pool stopped using
    because its server no longer is the one to use (a Sentinel client's, on a master change):
    nothing of it ran, and it may go once more to the server used now (``guarded_flow``)."""


class Unconfirmed(Exception):
    """A command was written but its reply never came; ``cause`` says why."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class NotSent(Exception):
    """A command was never written (the connection failed first, or its deadline had passed);
    ``cause`` says why. Nothing it would have done happened, and the connection may still serve."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _Marker:
    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return self.label


UNKNOWN = _Marker("UNKNOWN")
"""Sent, but the connection failed before the reply came."""
NOT_SENT = _Marker("NOT_SENT")
"""Never sent: the connection failed before this item's chunk went out."""
NOT_DURABLE = _Marker("NOT_DURABLE")
"""An acquire the master granted but fewer replicas than ``replicas_ack`` acknowledged in time."""


def wait_command(replicas: int, timeout: float) -> tuple[bytes, ...] | None:
    """``WAIT replicas timeout_ms`` to send after acquires, or None when no replica is waited for
    (``WAIT`` counts the replicas that have every write made so far on the same connection)."""
    if not replicas:
        return None
    return (b"WAIT", b"%d" % replicas, b"%d" % max(1, round(timeout * 1000.0)))


def durable_wait(wait: tuple[bytes, ...] | None, durable: bool,
                 script: _scripts.Script | None) -> tuple[bytes, ...] | None:
    """The ``WAIT`` a bulk call sends behind its last chunk (``durable`` acquires, with
    ``replicas_ack``), or None. Nothing may follow it: a call carrying a script (whose NOSCRIPT
    retry would) is refused; fenced and fair acquires refuse ``replicas_ack`` before they get here."""
    if not durable or wait is None:
        return None
    if script is not None:
        raise ValueError("a durable call carries no script (fenced acquires refuse replicas_ack)")
    return wait


def durable_reply(reply: object, acked: object, replicas: int) -> object:
    """An acquire's reply, ``NOT_DURABLE`` when it took the lock and ``WAIT`` answered ``acked``
    (a count, or None when it could not be asked) below ``replicas``."""
    if reply == b"OK" and not (type(acked) is int and acked >= replicas):
        return NOT_DURABLE
    return reply


def mark_not_durable(results: list[object], acked: object, replicas: int) -> None:
    """``durable_reply`` for every reply of a bulk call, in place."""
    if type(acked) is int and acked >= replicas:
        return
    for i, reply in enumerate(results):
        if reply == b"OK":
            results[i] = NOT_DURABLE


def item_encoders(append: Callable[[Any, int], None]) -> tuple[Encoder, Reencoder]:
    """The ``Encoder`` and ``Reencoder`` of items that ``append(buf, index)`` writes one by one."""

    def encode(buf: Any, start: int, stop: int) -> None:
        for index in range(start, stop):
            append(buf, index)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        for index in indices:
            append(buf, index)

    return encode, reencode


def subset_encoders(encode: Encoder, reencode: Reencoder | None,
                    indices: Sequence[int]) -> tuple[Encoder, Reencoder | None]:
    """Encoders of the items ``indices`` of a call, as items 0..len(indices)-1 of another
    (a chunk at once through ``reencode`` where there is one, else item by item)."""

    def encode_subset(buf: Any, start: int, stop: int) -> None:
        for i in indices[start:stop]:
            encode(buf, i, i + 1)

    if reencode is None:
        return encode_subset, None

    def encode_chunk(buf: Any, start: int, stop: int) -> None:
        reencode(buf, indices[start:stop])

    def reencode_subset(buf: Any, positions: Sequence[int]) -> None:
        reencode(buf, [indices[p] for p in positions])

    return encode_chunk, reencode_subset


def check_loaded(head: list[object], script: _scripts.Script) -> None:
    if head and type(head[0]) is ReplyError:
        error = head[0]
        raise ResponseError(f"cannot load the {script.name} script: {error}", error.code)


def settle_reloaded(row: list[object], indices: Sequence[int], got: list[object], loaded_first: bool) -> None:
    """Put the replies of commands sent again after NOSCRIPT into ``row``; with ``loaded_first``
    the first reply is SCRIPT LOAD's, and a refused load (an ACL) is every item's answer."""
    if loaded_first:
        loaded = got.pop(0)
        if type(loaded) is ReplyError:
            got = [loaded] * len(indices)
    for i, reply in zip(indices, got, strict=True):
        row[i] = reply


def noscript_indices(results: list[object]) -> list[int]:
    if ReplyError not in set(map(type, results)):  # the usual case, in one C-level pass
        return []
    return [i for i, reply in enumerate(results) if type(reply) is ReplyError and reply.code == "NOSCRIPT"]


def failures(reply: object, size: int) -> list[tuple[int, object]] | None:
    """What a failures-only reply (``RENEW_MANY``, ``RENEW_MANY_ARGV``, ``RELEASE_MANY``) of a
    call over ``size`` keys says: (position, outcome) of each key that failed, in order, [] when
    every key succeeded; None when it is not such a reply (an error for the whole call, no
    answer, or a list that no Redis would send: each of its keys' outcomes is then unknown)."""
    if type(reply) is not list:
        return None
    if not reply:
        return []
    if len(reply) % 2:
        return None
    out = []
    last = 0
    for at in range(0, len(reply), 2):
        position = reply[at]
        if type(position) is not int or not last < position <= size:
            return None
        out.append((position - 1, reply[at + 1]))
        last = position
    return out


def with_failures(outcomes: list[object]) -> list[object]:
    """A failures-only reply for per-key ``outcomes`` (1 succeeded), as ``failures`` reads it:
    what a Redis Cluster renewal, made of several nodes' replies, answers for a whole batch."""
    reply: list[object] = []
    for position, outcome in enumerate(outcomes, 1):
        if not (type(outcome) is int and outcome == 1):
            reply += (position, outcome)
    return reply
