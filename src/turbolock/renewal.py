"""Auto-renewal: one background thread and one timer wheel renew every held lock of a client.

Due locks are renewed in batches, one EVALSHA per chunk of up to ``RENEW_CHUNK`` keys (a single
script over 100k keys would block the server for about half a second). Each lock ends every
renewal in one of three ways: renewed; lost (the key is gone or holds another token); or
indeterminate (transport error, timeout, error reply), retried until the lock's local safe-until
deadline passes, then lost. Safe-until is ``sent_at + ttl`` of the last renewal that succeeded,
with ``sent_at`` taken before the command was written, so it can only err on the safe side.

A lost lock is always signalled: ``lease.lost`` is set, ``on_lost(lease)`` is called on the
renewer thread (its exceptions are logged), and ``lease.ensure_held()`` raises.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _scripts
from ._executor import NOT_SENT, UNKNOWN, Reencoder
from ._pipeline import Encoder
from ._validate import timeout_seconds
from .errors import InvalidArgumentError, InvalidArgumentTypeError, ReplyError
from .lease import Lease

if TYPE_CHECKING:
    from .client import LockClient

log = logging.getLogger("turbolock.renewal")

RENEW_CHUNK = 1000
WHEEL_TICK = 0.01
# How often the thread looks at the wheel while it holds locks: renewals run up to this late,
# which their margin (more than one call deadline) absorbs; waking every tick cost ~1% of a core.
POLL_INTERVAL = 0.05
NO_LIMIT = math.inf  # one shared float, not one per renewed lock
WHEEL_SLOTS = 1024
COMMANDS_PER_WRITE = 8

OnLost = Callable[[Lease], object]


@dataclass(frozen=True)
class AutoRenew:
    """How a lock is renewed. ``renew_before``: seconds before expiry to renew (default a third
    of the ttl). ``max_renewals``: renew at most that many times. ``max_hold``: never renew past
    that many seconds after the acquire (the last renewal that fits is the last one made).
    When a limit stops renewal the lock expires and is then reported lost, like any other."""

    renew_before: float | None = None
    max_renewals: int | None = None
    max_hold: float | None = None


class RenewalTerms:
    """What every lease of one ``add()`` shares: kept once, not once per lease."""

    __slots__ = ("renew_before", "max_renewals", "on_lost")

    def __init__(self, renew_before: float, max_renewals: int | None, on_lost: OnLost | None) -> None:
        self.renew_before = renew_before
        self.max_renewals = max_renewals
        self.on_lost = on_lost


class RenewalState:
    """Per-lease renewal bookkeeping, kept small: 100k renewed locks are a normal load."""

    __slots__ = ("id", "terms", "renewals", "hold_until", "released", "limit_reached")

    def __init__(self, item_id: int, terms: RenewalTerms, hold_until: float) -> None:
        self.id = item_id
        self.terms = terms
        self.renewals = 0
        self.hold_until = hold_until
        self.released = False
        self.limit_reached = False

    @property
    def renew_before(self) -> float:
        return self.terms.renew_before

    @property
    def max_renewals(self) -> int | None:
        return self.terms.max_renewals

    @property
    def on_lost(self) -> OnLost | None:
        return self.terms.on_lost


def check_policy(policy: object, ttl_ms: int, call_timeout: float) -> AutoRenew:
    """Validate ``auto_renew`` (True or an AutoRenew) against the ttl and the call deadline."""
    if policy is True:
        policy = AutoRenew()
    if not isinstance(policy, AutoRenew):
        raise InvalidArgumentTypeError("auto_renew", "must be True, False or an AutoRenew")
    ttl = ttl_ms / 1000.0
    before = ttl / 3 if policy.renew_before is None else timeout_seconds(policy.renew_before, "renew_before")
    if before is None or not 0 < before < ttl:
        raise InvalidArgumentError("renew_before", f"must be more than 0 and less than the ttl ({ttl:g}s)")
    if before <= call_timeout:
        raise InvalidArgumentError(
            "renew_before",
            f"renewing {before:g}s before expiry leaves less than one call deadline ({call_timeout:g}s) of "
            "margin; use a longer ttl, a larger renew_before or a shorter client timeout")
    if policy.max_renewals is not None and (
            isinstance(policy.max_renewals, bool) or not isinstance(policy.max_renewals, int)
            or policy.max_renewals < 0):
        raise InvalidArgumentError("max_renewals", "must be a non-negative int")
    if policy.max_hold is not None:
        hold = timeout_seconds(policy.max_hold, "max_hold")
        if hold is None or hold <= 0:
            raise InvalidArgumentError("max_hold", "must be a positive, finite number of seconds")
    return AutoRenew(before, policy.max_renewals, policy.max_hold)


def limit_reached(lease: Lease, state: RenewalState, now: float) -> bool:
    """Whether one more renewal would pass the lock's max_renewals or max_hold."""
    if state.max_renewals is not None and state.renewals >= state.max_renewals:
        return True
    return now + lease.ttl_ms / 1000.0 > state.hold_until


def retry_time(lease: Lease, state: RenewalState, now: float) -> float:
    """When to retry an indeterminate renewal: soon, and never after the lock's safe-until."""
    return min(now + max(WHEEL_TICK, min(state.renew_before / 4, 1.0)), lease.expires_at)


Batch = tuple[int, list[Lease]]
"""A ttl in ms and up to RENEW_CHUNK leases renewed with it by one script call."""


def split_batches(leases: list[Lease]) -> list[Batch]:
    groups: dict[int, list[Lease]] = {}
    for lease in leases:
        groups.setdefault(lease.ttl_ms, []).append(lease)
    return [(ttl_ms, group[start:start + RENEW_CHUNK])
            for ttl_ms, group in groups.items() for start in range(0, len(group), RENEW_CHUNK)]


def batch_encoders(batches: list[Batch], sha: bytes) -> tuple[Encoder, Reencoder]:
    """One multi-key EVALSHA per batch: by range of batches, and again by index after NOSCRIPT."""

    def append(buf: Any, index: int) -> None:
        ttl_ms, batch = batches[index]
        buf.append_evalsha_multikey(sha, [lease.key for lease in batch], [lease.token for lease in batch],
                                    ttl_ms)

    def encode(buf: Any, start: int, stop: int) -> None:
        for index in range(start, stop):
            append(buf, index)

    def reencode(buf: Any, indices: Sequence[int]) -> None:
        for index in indices:
            append(buf, index)

    return encode, reencode


def describe_reply(reply: object) -> str:
    return str(reply) if isinstance(reply, Exception) else type(reply).__name__


class Renewer:
    """The renewal thread of one client; started on the first auto-renewed lease."""

    def __init__(self, client: LockClient) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._wheel: Any = client.core.TimerWheel(WHEEL_TICK, WHEEL_SLOTS, time.monotonic())
        self._held: dict[int, Lease] = {}
        self._ids = itertools.count(1)
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._poll = POLL_INTERVAL

    def __len__(self) -> int:
        return len(self._held)

    def add(self, leases: Iterable[Lease], policy: AutoRenew, on_lost: OnLost | None) -> None:
        before = policy.renew_before
        assert before is not None
        max_hold = policy.max_hold
        with self._lock:
            if self._stopping:
                raise InvalidArgumentError("auto_renew", "the client is closed")
            wheel = self._wheel
            held = self._held
            ids = self._ids
            terms = RenewalTerms(before, policy.max_renewals, on_lost)
            self._poll = max(WHEEL_TICK, min(self._poll, before / 4))
            for lease in leases:
                hold_until = NO_LIMIT if max_hold is None else lease.acquired_at + max_hold
                state = RenewalState(next(ids), terms, hold_until)
                lease.renewal = state
                held[state.id] = lease
                wheel.schedule(state.id, lease.expires_at - before)
            self._start()
        self._wakeup.set()

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="turbolock-renewer", daemon=True)
            self._thread.start()

    def remove(self, leases: Iterable[Lease]) -> None:
        """Stop renewing (the lease is being released); a renewal in flight is then ignored."""
        with self._lock:
            for lease in leases:
                state = lease.renewal
                if state is None:
                    continue
                state.released = True
                self._wheel.cancel(state.id)
                self._held.pop(state.id, None)

    def rescheduled(self, lease: Lease) -> None:
        """The lease was extended by hand: renew relative to its new expiry."""
        state = lease.renewal
        if state is not None:
            self._reschedule(lease, lease.expires_at - state.renew_before)

    def held_leases(self) -> list[Lease]:
        with self._lock:
            return list(self._held.values())

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self._wakeup.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's locks are not ours to renew; no thread runs here."""
        self._lock = threading.Lock()
        self._held.clear()
        self._wheel = self._client.core.TimerWheel(WHEEL_TICK, WHEEL_SLOTS, time.monotonic())
        self._thread = None
        self._wakeup = threading.Event()

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
                due_ids = self._wheel.advance(time.monotonic())
                held = self._held
                due = [held[i] for i in due_ids if i in held]
                idle = not held
            if due:
                try:
                    self._renew(due)
                except Exception:  # the renewer must survive anything
                    log.exception("turbolock: renewal round failed; retrying its locks")
                    self._retry_later(due)
            self._wakeup.wait(None if idle else self._poll)
            self._wakeup.clear()

    def _renew(self, due: list[Lease]) -> None:
        now = time.monotonic()
        to_send: list[Lease] = []
        for lease in due:
            state = lease.renewal
            if state is None or state.released:
                continue
            if lease.expires_at <= now:
                reason = ("its renewal limit was reached and it expired" if state.limit_reached else
                          "it could not be renewed before it expired")
                self._lost(lease, reason)
            elif state.limit_reached or self._limit_reached(lease, state, now):
                state.limit_reached = True
                self._reschedule(lease, lease.expires_at)
            else:
                to_send.append(lease)
        if to_send:
            self._send(to_send)

    @staticmethod
    def _limit_reached(lease: Lease, state: RenewalState, now: float) -> bool:
        return limit_reached(lease, state, now)

    def _send(self, leases: list[Lease]) -> None:
        batches = split_batches(leases)
        encode, reencode = batch_encoders(batches, _scripts.RENEW_MANY.sha)
        settled = [False] * len(batches)

        def settle(index: int, reply: object) -> None:
            batch = batches[index][1]
            settled[index] = True
            if type(reply) is list and len(reply) == len(batch):
                self._settle(batch, reply, sent_at)
                return
            if reply is not UNKNOWN and reply is not NOT_SENT:
                log.warning("turbolock: renewal of %d locks got %s", len(batch), describe_reply(reply))
            self._retry_later(batch)

        def on_replies(start: int, replies: list[object]) -> None:
            # Settled while the server runs the next scripts; NOSCRIPT ones wait for their retry.
            for index, reply in enumerate(replies, start):
                if not (type(reply) is ReplyError and reply.code == "NOSCRIPT"):
                    settle(index, reply)

        sent_at = time.monotonic()
        try:
            replies = self._client._exec_renewals.many(len(batches), encode, _scripts.RENEW_MANY, reencode,
                                                       on_replies=on_replies)
        except Exception as exc:  # no connection at all: every lock is indeterminate
            log.warning("turbolock: renewal of %d locks could not be sent: %s", len(leases), exc)
            replies = [NOT_SENT] * len(batches)
        for index, reply in enumerate(replies):
            if not settled[index]:
                settle(index, reply)

    def _settle(self, batch: list[Lease], outcomes: list[object], sent_at: float) -> None:
        lost: list[Lease] = []
        with self._lock:
            for lease, outcome in zip(batch, outcomes, strict=True):
                state = lease.renewal
                if state is None or state.released:
                    continue
                if outcome == 1:
                    lease.acquired_at = sent_at
                    state.renewals += 1
                    self._wheel.schedule(state.id, lease.expires_at - state.renew_before)
                else:
                    lost.append(lease)
        for lease in lost:
            self._lost(lease, "its key was gone or held by another token at renewal")

    def _retry_later(self, leases: list[Lease]) -> None:
        now = time.monotonic()
        with self._lock:
            for lease in leases:
                state = lease.renewal
                if state is None or state.released:
                    continue
                self._wheel.schedule(state.id, retry_time(lease, state, now))

    def _reschedule(self, lease: Lease, when: float) -> None:
        state = lease.renewal
        assert state is not None
        with self._lock:
            if not state.released:
                self._wheel.schedule(state.id, when)

    def _lost(self, lease: Lease, reason: str) -> None:
        state = lease.renewal
        assert state is not None
        with self._lock:
            if state.released:
                return
            self._wheel.cancel(state.id)
            self._held.pop(state.id, None)
        if not lease.mark_lost(reason):
            return
        log.warning("turbolock: lock %r lost: %s", lease.name, reason)
        if state.on_lost is not None:
            try:
                state.on_lost(lease)
            except Exception:  # a callback must never stop the renewer
                log.exception("turbolock: on_lost callback for lock %r raised", lease.name)

