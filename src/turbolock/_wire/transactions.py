"""A fenced bulk acquire on one server as MULTI/EXEC transactions, and their replies read back as
one reply per transaction, in the shape a multi-key script's would have.

Each transaction takes up to ``scripts.KEYS_PER_CALL`` locks: ``MULTI``, ``FENCES_FOR`` (the
last of as many new fences as it has locks, from the prefix's one counter), a plain
``SET NX PX`` per lock, ``EXEC``, then ``DISCARD``: an EXEC the server does not know (renamed
away) leaves the connection inside MULTI, where every later command would be queued and never
run; DISCARD ends that, and after an EXEC that ran it only answers an error. The server runs a
transaction whole, and nothing runs between its commands, so lock ``j`` of it takes fence
``last - size + 1 + j`` as atomically as a script taking that lock and its fence would, at the
cost of a plain ``SET`` (a script's call per key costs the server more: see
``benchmarks/fence_server_bound.py``).

It answers ``size + 4`` replies: ``OK`` for MULTI, ``QUEUED`` (or an error, then EXEC answers
EXECABORT and nothing ran) per command, EXEC's list (the last fence, or the counter's error,
then each ``SET``'s ``OK`` or nil) and DISCARD's error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turbolock._wire import scripts as _scripts
from turbolock._wire.outcomes import UNKNOWN
from turbolock.errors import ReplyError

EXTRA_REPLIES = 4
"""Replies of a transaction besides one per lock: MULTI's, FENCES_FOR's QUEUED, EXEC's and
DISCARD's."""

_MULTI = (b"MULTI",)
_EXEC = (b"EXEC",)
_DISCARD = (b"DISCARD",)
_ABORTED_BECAUSE = "Transaction discarded because of: "


def append_transaction(buf: Any, keys: Sequence[bytes], tokens: Sequence[bytes], ttl_ms: int) -> None:
    """One transaction taking ``keys`` (names before the buffer's key prefix) with ``tokens``."""
    counter = _scripts.fence_counter(buf.key_prefix)
    buf.append_command(_MULTI)
    # EVAL, not EVALSHA: a script missing from the server would fail inside EXEC, after the
    # SETs it should have guarded had run; EVAL cannot miss it (the server caches it by hash).
    buf.append_command((b"EVAL", _scripts.FENCES_FOR.source, b"1", counter, b"%d" % len(keys)))
    buf.append_set_nx_px_many(keys, tokens, ttl_ms)
    buf.append_command(_EXEC)
    buf.append_command(_DISCARD)


def fold_transaction(raw: list[object], size: int) -> object:
    """One transaction's replies as a multi-key script call's: a list of one reply per lock
    (its fence, None when held, or that lock's error), or one error for the whole call: MULTI
    refused (its commands then ran one by one, unguarded: the caller gives back every lock),
    EXEC refused (nothing ran: the first command refused when queued says why, else EXECABORT's
    own reason, e.g. READONLY for a master demoted before EXEC came, so that a Sentinel client
    sends it again; or EXEC's error), or the counter failing (the SETs ran without fences:
    given back too). Anything else (not Redis's answer) comes back as ``UNKNOWN`` for each lock."""
    if len(raw) != size + EXTRA_REPLIES:
        return [UNKNOWN] * size
    if type(raw[0]) is ReplyError:
        return raw[0]
    executed = raw[-2]
    if type(executed) is ReplyError:
        refused = next((reply for reply in raw[1:-2] if type(reply) is ReplyError), None)
        if refused is not None:
            return refused
        message = str(executed)
        if executed.code == "EXECABORT" and _ABORTED_BECAUSE in message:
            return ReplyError(message.split(_ABORTED_BECAUSE, 1)[1])
        return executed
    if type(executed) is not list or len(executed) != size + 1:
        return [UNKNOWN] * size
    last = executed[0]
    if type(last) is ReplyError:
        return last
    if type(last) is not int:
        return [UNKNOWN] * size
    first = last - size + 1
    if executed.count(b"OK") == size:
        return list(range(first, last + 1))
    return [first + j if reply == b"OK" else reply for j, reply in enumerate(executed[1:])]


class Transactions:
    """The reply shape of bulk items that are transactions of ``sizes[i]`` locks each: how many
    replies items ``start``..``stop`` answer, and those replies folded to one per item."""

    __slots__ = ("sizes",)

    def __init__(self, sizes: Sequence[int]) -> None:
        self.sizes = sizes

    def count(self, start: int, stop: int) -> int:
        return sum(self.sizes[start:stop]) + EXTRA_REPLIES * (stop - start)

    def fold(self, start: int, stop: int, raw: list[object]) -> list[object]:
        return fold_transactions(raw, self.sizes[start:stop])

    def subset(self, indices: Sequence[int]) -> Transactions:
        """The shape of items ``indices`` sent again as items 0, 1, ..."""
        return Transactions([self.sizes[i] for i in indices])


def fold_transactions(raw: list[object], sizes: Sequence[int]) -> list[object]:
    """``fold_transaction`` for consecutive transactions of ``sizes`` locks."""
    out: list[object] = []
    at = 0
    for size in sizes:
        stop = at + size + EXTRA_REPLIES
        out.append(fold_transaction(raw[at:stop], size))
        at = stop
    return out
