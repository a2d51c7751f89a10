"""Locks that may be held for nobody, released with their tokens in the background.

An acquire whose reply was lost may have taken its lock; a release whose reply was lost may
not have run. Either way the client keeps ``(key, token)`` here and releases it (compare and
delete, so a lock someone else took since is never touched) until the server answers, or until
the key has certainly expired by its ttl: nothing is kept longer than that. A fair waiter that gave up
is kept the same way, its ``fair.Leaving`` in place of a token, until it has left its queue
(``cleanup_flows``). Sans-IO: the
threaded and the asyncio clients, and Redlock's masters, each drive it their own way.

A release answered 0 (the lock was not ours) does not prove an acquire whose reply was lost
will never run: its command may still be on its way to the server on the connection given up
(a TCP resend, a busy server still reading what that connection sent before it closed), and
take the lock after the release. Such entries, when their token is one this client made (no
caller can ever acquire with it, so a later release can only delete what that command took),
are released once more after each of ``RECHECK_AFTER``, while their key may live.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from turbolock.errors import ReplyError

log = logging.getLogger("turbolock")

Entry = tuple[bytes, bytes, float]
"""A key, its token, and the monotonic time after which its key has certainly expired."""

IN_FLIGHT = -1.0
"""``CleanupBook.claim``'s answer when the entry's release is on its way right now."""

FIRST_RETRY = 0.05
LAST_RETRY = 1.0

RECHECK_AFTER = (0.5, 2.0)
"""Seconds after a release of a maybe-taken lock found it free before it is released again (then
after the next), for entries remembered with ``recheck``."""


class CleanupBook:
    __slots__ = ("_pending", "_lock", "_in_flight", "_in_flight_count", "_rechecked", "_rechecks",
                 "_refusals")

    def __init__(self) -> None:
        # By key and token: two maybe-held attempts at one key with two tokens are both released.
        self._pending: dict[tuple[bytes, bytes], float] = {}
        self._lock = threading.Lock()
        self._in_flight: dict[tuple[bytes, bytes], int] = {}
        """Entries taken and not settled yet, each with how many times (a key and token owed
        again while its release is on its way)."""
        self._in_flight_count = 0  # their sum, read without the lock
        self._rechecked: dict[tuple[bytes, bytes], int] = {}
        """Entries to release again after an answer 0 (``recheck``): how many times they were."""
        self._rechecks: dict[tuple[bytes, bytes], tuple[float, float]] = {}
        """Entries answered 0 that wait for their next release: (forget_at, when it is due)."""
        self._refusals: set[str] = set()
        """The error codes the server answered releases with, each logged once."""

    def __len__(self) -> int:
        """Entries waiting for a definite answer, and entries being released right now (not
        the ones answered already that only wait to be released again)."""
        return len(self._pending) + self._in_flight_count

    def __bool__(self) -> bool:
        """Whether anything is left to send, now or later."""
        return bool(self._pending) or bool(self._rechecks)

    def remember(self, key: bytes, token: bytes, forget_at: float, recheck: bool = False) -> None:
        """Release ``key`` with ``token`` until ``forget_at``; ``recheck``: an acquire whose
        command may still run, with a token this client made (see the module's notes)."""
        with self._lock:
            self._pending[key, token] = forget_at
            if recheck:
                self._rechecked.setdefault((key, token), 0)

    def take(self, limit: int | None = None) -> list[Entry]:
        """Up to ``limit`` entries to release now (the expired ones are dropped); each must come
        back through ``settle``."""
        now = time.monotonic()
        with self._lock:
            pending = self._pending
            if self._rechecks:
                self._due_rechecks(now)
            if not pending:
                return []
            entries = [(key, token, at) for (key, token), at in pending.items() if at > now]
            if self._rechecked and len(entries) < len(pending):
                for pair, at in pending.items():
                    if at <= now:
                        self._rechecked.pop(pair, None)
            pending.clear()
            if limit is not None and len(entries) > limit:
                for key, token, at in entries[limit:]:
                    pending[key, token] = at
                entries = entries[:limit]
            in_flight = self._in_flight
            for key, token, _ in entries:
                in_flight[key, token] = in_flight.get((key, token), 0) + 1
            self._in_flight_count += len(entries)
        return entries

    def _due_rechecks(self, now: float) -> None:
        """Move the rechecks due by ``now`` to the pending entries; drop those past their expiry."""
        rechecks = self._rechecks
        for pair, (at, due) in list(rechecks.items()):
            if at <= now:
                del rechecks[pair]
                self._rechecked.pop(pair, None)
            elif due <= now:
                del rechecks[pair]
                self._pending.setdefault(pair, at)

    def claim(self, key: bytes, token: bytes) -> float | None:
        """Take the entry of ``key`` and ``token`` for the caller to release itself (its
        expiry; on its way until the caller settles it), None when there is none,
        ``IN_FLIGHT`` when its release is on its way already."""
        with self._lock:
            if (key, token) in self._in_flight:
                return IN_FLIGHT
            self._rechecked.pop((key, token), None)  # the caller settles it: no release comes later
            recheck = self._rechecks.pop((key, token), None)
            forget_at = self._pending.pop((key, token), None if recheck is None else recheck[0])
            if forget_at is not None:
                self._in_flight[key, token] = 1
                self._in_flight_count += 1
            return forget_at

    def drop(self, key: bytes, token: bytes) -> None:
        """The caller released ``key`` with ``token`` itself: no release is owed for it any more
        (one on its way already is settled as usual)."""
        pair = (key, token)
        with self._lock:
            if pair not in self._in_flight:
                self._pending.pop(pair, None)
                self._rechecks.pop(pair, None)
                self._rechecked.pop(pair, None)

    def on_its_way(self, key: bytes, token: bytes) -> bool:
        """Whether the release of ``key`` with ``token`` is being sent right now."""
        return (key, token) in self._in_flight

    def settle(self, entries: Sequence[Entry], replies: Sequence[object] | None) -> None:
        """Keep the entries whose release got no definite answer (an int), until they expire."""
        now = time.monotonic()
        with self._lock:
            in_flight = self._in_flight
            for key, token, _ in entries:
                count = in_flight.pop((key, token), 0)  # 0: settled already, or cleared (a fork)
                if count:
                    self._in_flight_count -= 1
                    if count > 1:
                        in_flight[key, token] = count - 1
            pending = self._pending
            rechecked = self._rechecked
            if replies is None:
                for key, token, at in entries:
                    if at > now:
                        pending.setdefault((key, token), at)
                    elif rechecked:
                        rechecked.pop((key, token), None)
                return
            refused = None
            for (key, token, at), reply in zip(entries, replies, strict=True):
                if type(reply) is not int:
                    if type(reply) is ReplyError and reply.code not in self._refusals:
                        self._refusals.add(reply.code)
                        refused = reply
                    if at > now:
                        pending.setdefault((key, token), at)
                    elif rechecked:
                        rechecked.pop((key, token), None)
                elif rechecked:
                    self._settle_recheck((key, token), at, reply, now)
        if refused is not None:  # said once per error code: what the operator must fix (a NOPERM)
            log.warning("turbolock: the server refused a background release of a maybe-held lock (%s); it is "
                        "retried until the lock's ttl has surely ended", refused)

    def _settle_recheck(self, pair: tuple[bytes, bytes], at: float, reply: int, now: float) -> None:
        """After a definite answer: an entry with ``recheck`` answered 0 waits for its next release."""
        done = self._rechecked.get(pair)
        if done is None:
            return
        if reply == 0 and done < len(RECHECK_AFTER) and now + RECHECK_AFTER[done] < at:
            self._rechecked[pair] = done + 1
            self._rechecks[pair] = (at, now + RECHECK_AFTER[done])
        else:
            del self._rechecked[pair]

    def next_expiry(self) -> float | None:
        """When the earliest entry may be dropped, or a recheck is due (None when there is none)."""
        with self._lock:
            soonest = min(self._pending.values(), default=None)
            if self._rechecks:
                due = min(due for _, due in self._rechecks.values())
                soonest = due if soonest is None else min(soonest, due)
            return soonest

    def clear(self) -> None:
        """Forget every entry, those on their way too."""
        with self._lock:
            self._forget()

    def forget_after_fork(self) -> None:
        """In a forked child: forget the parent's entries, which no thread of this process will
        ever settle, under a new lock (the inherited one may be held by a parent's thread that
        does not exist here: taking it would hang the child in ``os.fork()``)."""
        self._lock = threading.Lock()
        self._forget()

    def _forget(self) -> None:
        self._pending.clear()
        self._in_flight.clear()
        self._in_flight_count = 0
        self._rechecked.clear()
        self._rechecks.clear()


def retry_delay(previous: float | None) -> float:
    """The wait before the next try while the server does not answer: 50 ms doubling to 1 s."""
    return FIRST_RETRY if previous is None else min(LAST_RETRY, previous * 2)
