"""The bookkeeping of auto-renewal, shared by the threaded, the asyncio and the Redlock renewers.

Sans-IO: it decides which leases are due, which are lost, when a failed renewal is retried and
what a reply means; the renewers only send the scripts, wait, and signal losses their own way.

A renewed lease is watched through a weak reference (``RenewalState`` is one): a lease that the
program dropped (a ``Lock`` that went out of scope while held) is not renewed forever; its state
lands in ``collected`` and the renewer releases the lock and logs a warning naming it.

Losses are declared early enough to be signalled no later than the lease's own expiry: a
renewal round never waits past the earliest expiry of its leases (less ``SETTLE_MARGIN``), so a
due lease is sent while a round still fits before then (``ROUND_FLOOR``), however late the
renewer woke; a failed renewal is retried until ``loss_guard`` seconds before the expiry (the
renewer may wake up to one poll interval and one wheel tick late), and so is the loss of a
lease whose renewal limit was reached.
"""

from __future__ import annotations

import itertools
import logging
import math
import operator
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from turbolock import _metrics
from turbolock._wire.outcomes import NOT_SENT, UNKNOWN, Encoder, Reencoder, item_encoders
from turbolock._wire.scripts import KEYS_PER_CALL
from turbolock._wire.validate import encode_name, timeout_seconds
from turbolock.errors import InvalidArgumentError, InvalidArgumentTypeError
from turbolock.lease import (
    FencedLease,
    Lease,
    belief_changes,
    commands_abandoned,
    commands_ran,
    commands_refused,
    commands_sent,
    commands_unknown,
    keep_on_lost,
    keys_of,
)

log = logging.getLogger("turbolock.renewal")

COMMANDS_PER_WRITE = 8
"""Renewal scripts written per write: rounds leave in small writes so replies come back early."""
RENEW_CHUNK = KEYS_PER_CALL
"""Leases per renewal script call (as every multi-key script call of a bulk call)."""
WHEEL_TICK = 0.01
WHEEL_SLOTS = 1024
# How often a renewer looks at the wheel while it holds locks: renewals run up to this late,
# which their margin absorbs; waking every tick cost ~1% of a core.
POLL_INTERVAL = 0.05
# Time a renewer needs between a round's deadline and the loss it may have to signal, with room
# for a thread woken late on a busy machine.
SETTLE_MARGIN = 0.025
LOSS_MARKING = 8e-6
"""Seconds to settle one lease of a round that failed and mark it lost (its ``lost`` set: about
4 us each, measured, twice that for a busy host), on top of the margin: a round of 10,000 leases
ends 80 ms sooner, so that the last of them is marked by its expiry."""
MAX_MARKING = 0.1
"""At most this much sooner (a round of 100,000 leases with a short ttl keeps its time to renew)."""
# The least time worth giving a round (a loopback round trip is well under it): a due lease is
# renewed as long as this much is left before its round would have to end.
ROUND_FLOOR = 0.002
# The smallest renew_before that leaves room for a poll, a tick and one loopback round trip.
MIN_RENEW_BEFORE = 0.05
NO_LIMIT = math.inf  # one shared float, not one per renewed lock


def marking(leases: int) -> float:
    """The time to settle and mark ``leases`` lost together (``LOSS_MARKING``, ``MAX_MARKING``)."""
    return min(leases * LOSS_MARKING, MAX_MARKING)


TERMS_BY_TTL = 16
"""Terms for other ttls kept per ``add()`` (``RenewalTerms.for_ttl``)."""

OnLost = Callable[[Lease], object]

LIMIT_REACHED = "its renewal limit was reached and it is expiring"
NOT_RENEWED = "it could not be renewed before it expired"
CLOSED_DURING_ACQUIRE = ("the client was closed while the acquire ran: the locks it took are neither "
                         "renewed nor released, and expire by their ttl")


@dataclass(frozen=True)
class AutoRenew:
    """How a lock is renewed. ``renew_before``: seconds before expiry to renew (default a third
    of the ttl). ``max_renewals``: renew at most that many times. ``max_hold``: never renew past
    that many seconds after the acquire (the last renewal that fits is the last one made).
    When a limit stops renewal the lock expires and is then reported lost, like any other."""

    renew_before: float | None = None
    max_renewals: int | None = None
    max_hold: float | None = None


def check_policy(policy: object, ttl_ms: int) -> AutoRenew:
    """Validate ``auto_renew`` (True or an AutoRenew) against the ttl.

    A renewal round gets its own deadline from the lock's expiry, not the client's call
    timeout, so any ttl works whose renewal margin leaves room for the renewer to wake up.
    """
    if policy is True:
        policy = AutoRenew()
    if not isinstance(policy, AutoRenew):
        raise InvalidArgumentTypeError("auto_renew", "must be True, False or an AutoRenew")
    ttl = ttl_ms / 1000.0
    # ttl_ms / 3000, not ttl / 3: 0.15 / 3 is a hair below 0.05 in floating point.
    before = ttl_ms / 3000.0 if policy.renew_before is None else timeout_seconds(policy.renew_before,
                                                                                 "renew_before")
    if before is None or not 0 < before < ttl:
        raise InvalidArgumentError("renew_before", f"must be more than 0 and less than the ttl ({ttl:g}s)")
    hint = (f"; with the default renew_before (a third of the ttl) the smallest ttl is "
            f"{MIN_RENEW_BEFORE * 3:g}s" if policy.renew_before is None else "")
    _check_margin(before, "renew_before", hint)
    renewals = policy.max_renewals
    if renewals is not None and (isinstance(renewals, bool) or not isinstance(renewals, int)):
        kind = type(renewals).__name__
        raise InvalidArgumentTypeError("max_renewals", f"must be an int or None, not {kind}")
    if renewals is not None and renewals < 0:
        raise InvalidArgumentError("max_renewals", "must be a non-negative int")
    hold = None
    if policy.max_hold is not None:
        hold = timeout_seconds(policy.max_hold, "max_hold")
        if hold is None or hold <= 0:
            raise InvalidArgumentError("max_hold", "must be a positive, finite number of seconds")
    checked = ThirdOfTtl if policy.renew_before is None else AutoRenew
    return checked(before, policy.max_renewals, hold)  # in seconds, as checked: a timedelta too


def extends_unconfirmed(client: Any, leases: Sequence[Lease], sent_at: float) -> None:
    """Extends that may or may not have run: each lease believes the earlier of its two expiries
    (``commands_unknown``), and an auto-renewed one is due again by that belief (its renewal was
    due by the later one: it ran past its believed expiry, neither renewed nor reported lost)."""
    commands_unknown(leases, sent_at)
    renewer = client._renewer_instance
    if renewer is not None:
        for lease in leases:
            if lease.renewal is not None:
                renewer.rescheduled(lease)


def check_renewed_ttl(leases: Sequence[Lease], ttl_ms: int) -> None:
    """An extend to ``ttl_ms``: refused before anything is sent for an auto-renewed lease whose
    renewal could not keep up with that ttl, as an acquire with it and auto-renewal is."""
    if not any(map(renewal_of, leases)):  # a C-level pass: most extends are of leases not renewed
        return
    for lease in leases:
        state = lease.renewal
        if state is not None and not state.released:
            _check_margin(state.terms.for_ttl(ttl_ms).renew_before, "ttl",
                          f" (an auto-renewed lock extended to {ttl_ms / 1000.0:g}s)")


def _check_margin(before: float, argument: str, hint: str) -> None:
    """Renewing ``before`` seconds before expiry leaves auto-renewal enough time, or ``argument``
    is refused (an acquire's renew_before, an extend's ttl)."""
    if before < MIN_RENEW_BEFORE:
        raise InvalidArgumentError(
            argument, f"renewing {before:g}s before expiry is too late: auto-renewal needs at least "
                      f"{MIN_RENEW_BEFORE:g}s of margin{hint}")


class ThirdOfTtl(AutoRenew):
    """A checked ``AutoRenew`` whose ``renew_before`` was left to the default, a third of the
    ttl: kept so when an extend changes the ttl (``RenewalTerms.for_ttl``)."""

    __slots__ = ()


class RenewalTerms:
    """What every lease of one ``add()`` shares: kept once, not once per lease."""

    __slots__ = ("renew_before", "max_renewals", "limited", "third_of_ttl", "_first", "_by_ttl")

    def __init__(self, renew_before: float, max_renewals: int | None, limited: bool = False,
                 third_of_ttl: bool = False, first: RenewalTerms | None = None) -> None:
        self.renew_before = renew_before
        self.max_renewals = max_renewals
        # Whether a max_renewals or a max_hold may stop renewal: most leases have neither, and
        # skip the check at every renewal.
        self.limited = limited or max_renewals is not None
        self.third_of_ttl = third_of_ttl
        """Whether ``renew_before`` is the default, a third of the ttl."""
        self._first = first
        """The terms of the ``add()`` these were made from for another ttl (``for_ttl``), whose
        margin is the one asked for; None for those terms themselves."""
        self._by_ttl: dict[int, RenewalTerms] | None = None

    def for_ttl(self, ttl_ms: int) -> RenewalTerms:
        """These terms for a lease extended by hand to ``ttl_ms``: the default margin is a third
        of the new ttl, and a margin given in seconds is kept while it is shorter than the ttl
        (else a third of it: a lease would be due again as soon as it was renewed). Made from the
        ``add()``'s own terms, whatever ttls came between, and shared by every lease extended to
        that ttl (a few ttls kept: additive extends make a new one each time)."""
        first = self._first or self
        before = ttl_ms / 3000.0
        if not first.third_of_ttl and first.renew_before < ttl_ms / 1000.0:
            before = first.renew_before
        if before == first.renew_before:
            return first
        by_ttl = first._by_ttl
        if by_ttl is None:
            by_ttl = first._by_ttl = {}
        terms = by_ttl.get(ttl_ms)
        if terms is None:
            if len(by_ttl) >= TERMS_BY_TTL:
                by_ttl.clear()
            terms = by_ttl[ttl_ms] = RenewalTerms(before, first.max_renewals, first.limited,
                                                  first.third_of_ttl, first)
        return terms


class RenewalState(weakref.ref):  # type: ignore[type-arg]
    """Per-lease renewal bookkeeping and the renewer's weak reference to the lease; small, since
    100k renewed locks are a normal load. Key and token are kept to release a dropped lease."""

    __slots__ = ("id", "terms", "renewals", "hold_until", "released", "limit_reached", "name", "token",
                 "ttl_ms")

    def __init__(self, lease: Lease, on_collected: Callable[[Any], object], item_id: int, terms: RenewalTerms,
                 hold_until: float) -> None:
        # weakref.ref takes its referent in __new__; its __init__ must not see the extra arguments.
        self.id = item_id
        self.terms = terms
        self.renewals = 0
        self.hold_until = hold_until
        self.released = False
        self.limit_reached = False
        # The lease's own name when it is a plain str or bytes (no copy); a subclass's could
        # point back at the lease and keep it from ever being dropped: its key instead.
        name = lease.name
        self.name = name if type(name) is str or type(name) is bytes else lease.key
        self.token = lease.token
        self.ttl_ms = lease.ttl_ms  # the longest a dropped lease's key may still live

    def __new__(cls, lease: Lease, on_collected: Callable[[Any], object], *args: object) -> RenewalState:
        return super().__new__(cls, lease, on_collected)

    @property
    def key(self) -> bytes:
        return encode_name(self.name)

    @property
    def renew_before(self) -> float:
        return self.terms.renew_before

    @property
    def max_renewals(self) -> int | None:
        return self.terms.max_renewals


renewal_of = operator.attrgetter("renewal")
"""A lease's RenewalState, never falsy, or None: ``any(map(renewal_of, leases))`` in C."""
_ttl_ms = operator.attrgetter("ttl_ms")
_token = operator.attrgetter("token")
_expires_at = operator.attrgetter("expires_at")

PLAIN_LEASES = tuple(cls for cls in (Lease, FencedLease)
                     if cls.expires_at is Lease.expires_at and cls.expiry_after is Lease.expiry_after)
"""Leases whose believed expiry the core may read from their slots (``DueReader``)."""


class DueLeases(list[Lease]):
    """The leases a wake-up found due, and the earliest expiry among them as it was then (read
    once, for ``round_deadline``: a round's leases are not looked over twice unless some belief
    may have gone down since, ``changes`` being ``belief_changes()`` before the reading)."""

    earliest: float = math.inf
    changes: int = -1


Batch = tuple[int, list[Lease]]
"""A ttl in ms and up to RENEW_CHUNK leases renewed with it by one script call."""


def split_batches(leases: list[Lease]) -> list[Batch]:
    ttls = set(map(_ttl_ms, leases))
    if len(ttls) == 1:  # the usual round: every lease of one ttl, sliced without a dict
        groups = {ttls.pop(): leases}
    else:
        groups = {}
        for lease in leases:
            groups.setdefault(lease.ttl_ms, []).append(lease)
    return [(ttl_ms, group[start:start + RENEW_CHUNK])
            for ttl_ms, group in groups.items() for start in range(0, len(group), RENEW_CHUNK)]


def batch_encoders(batches: list[Batch], sha: bytes, core: Any) -> tuple[Encoder, Reencoder]:
    """One multi-key EVALSHA per batch: by range of batches, and again by index after NOSCRIPT
    (the keys made by ``core``, the client's)."""

    def append(buf: Any, index: int) -> None:
        ttl_ms, batch = batches[index]
        buf.append_evalsha_multikey(sha, keys_of(batch, core), list(map(_token, batch)), ttl_ms)

    return item_encoders(append)


def describe_reply(reply: object) -> str:
    return str(reply) if isinstance(reply, Exception) else type(reply).__name__


class RenewalBook:
    """Which leases are renewed, when each is due, and what each renewal's outcome means."""

    def __init__(self, core: Any, now: float, limit: Callable[[Lease], bool] | None = None) -> None:
        self._core = core
        self._limit = limit  # a front end's own renewal limit (Redlock's max_extensions)
        self._lock = threading.Lock()
        self._wheel: Any = core.TimerWheel(WHEEL_TICK, WHEEL_SLOTS, now)
        self._due_reader: Any = core.DueReader(RenewalState, RenewalTerms, PLAIN_LEASES)
        self._held: dict[int, RenewalState] = {}
        self._ids = itertools.count(1)
        self._collected: deque[RenewalState] = deque()
        # Bound once: a weakref callback must be the same cheap object for every lease, and
        # deque.append takes no lock, so it is safe wherever the collector happens to run.
        self._on_collected = self._collected.append
        self.poll = POLL_INTERVAL

    def __len__(self) -> int:
        return len(self._held)

    @property
    def loss_guard(self) -> float:
        """How long before a lease's expiry its loss must be declared to be signalled in time."""
        return self.poll + WHEEL_TICK + SETTLE_MARGIN

    def add(self, leases: Iterable[Lease], policy: AutoRenew, on_lost: OnLost | None) -> None:
        before = policy.renew_before
        assert before is not None
        max_hold = policy.max_hold
        terms = RenewalTerms(before, policy.max_renewals, max_hold is not None,
                             isinstance(policy, ThirdOfTtl))
        on_collected = self._on_collected
        with self._lock:
            wheel = self._wheel
            held = self._held
            ids = self._ids
            self._poll_for(before)
            for lease in leases:
                if on_lost is not None:  # the lease's own: see keep_on_lost
                    keep_on_lost(lease, on_lost)
                hold_until = NO_LIMIT if max_hold is None else lease.acquired_at + max_hold
                state = RenewalState(lease, on_collected, next(ids), terms, hold_until)
                lease.renewal = state
                held[state.id] = state
                wheel.schedule(state.id, lease.expires_at - before)

    def _poll_for(self, before: float) -> None:
        """Wake often enough for a margin of ``before`` seconds (under ``_lock``)."""
        self.poll = max(WHEEL_TICK, min(self.poll, before / 4))

    def remove(self, leases: Iterable[Lease]) -> list[int]:
        """Stop renewing (the lease is being released); a renewal in flight is then ignored.
        The ids of the states removed."""
        removed = []
        with self._lock:
            for lease in leases:
                state = lease.renewal
                if state is None or state.released:
                    continue
                state.released = True
                self._wheel.cancel(state.id)
                self._held.pop(state.id, None)
                removed.append(state.id)
        return removed

    def rescheduled(self, lease: Lease) -> None:
        """The lease was extended by hand: renew relative to its new expiry, by the margin its
        new ttl calls for (``RenewalTerms.for_ttl``)."""
        state = lease.renewal
        if state is not None and not state.released:  # a release settled first: nothing to renew
            if state.ttl_ms != lease.ttl_ms:
                state.ttl_ms = lease.ttl_ms
                state.terms = terms = state.terms.for_ttl(lease.ttl_ms)
                with self._lock:
                    self._poll_for(terms.renew_before)
            expires_at, now = lease.expires_at, time.monotonic()
            when = expires_at - state.renew_before
            self._schedule(state, when if when > now else _capped_due(state, expires_at, now))

    def held_leases(self) -> list[Lease]:
        with self._lock:
            states = list(self._held.values())
        return [lease for lease in map(_alive, states) if lease is not None]

    def take_collected(self) -> list[RenewalState]:
        """States of leases the program dropped while renewed, now forgotten by the book (each
        logged with its lock's name); the renewer releases their locks."""
        if not self._collected:
            return []
        dropped = []
        with self._lock:
            while self._collected:
                state = self._collected.popleft()
                if state.released:
                    continue
                state.released = True
                self._wheel.cancel(state.id)
                self._held.pop(state.id, None)
                dropped.append(state)
        for state in dropped:
            log.warning("turbolock: lock %r was still held and auto-renewed when the program dropped its "
                        "last reference to it; renewal stopped and the lock is released",
                        state.name)
        return dropped

    def take_due(self, now: float, lead: float = 0.0) -> tuple[list[Lease], list[tuple[Lease, str]]]:
        """The leases to renew now (those due within ``lead`` too: a renewer that knows its rounds
        run late starts them early), and the leases found lost (with why) that are due."""
        with self._lock:
            due_ids = self._wheel.advance(now + lead)
            get = self._held.get
            states = [state for state in map(get, due_ids) if state is not None]
        changes = belief_changes()
        margin = SETTLE_MARGIN + ROUND_FLOOR
        # The plainest states in one pass of the core (most of them); the others below.
        plain, earliest, states = ((), math.inf, states) if self._limit is not None else \
            self._due_reader.split(states, now, margin)
        to_send = DueLeases(plain)
        to_send.changes = changes
        send = to_send.append
        lost: list[tuple[Lease, str]] = []
        guard = self.loss_guard
        limit = self._limit
        for state in states:
            lease = state()
            if lease is None or state.released:
                continue
            if (state.limit_reached or (state.terms.limited and limit_reached(lease, state, now))
                    or (limit is not None and limit(lease))):
                # Not renewed again: lost at the last wake-up that still signals it in time.
                state.limit_reached = True
                if lease.expires_at - guard <= now:
                    lost.append((lease, LIMIT_REACHED))
                else:
                    self._schedule(state, lease.expires_at - guard)
                continue
            expires_at = lease.expires_at
            if expires_at - margin <= now:
                lost.append((lease, NOT_RENEWED))
            else:
                # Sent even when the renewer woke late: the round ends by the expiry less
                # SETTLE_MARGIN, and a failed one is declared lost then (``failed``).
                send(lease)
                if expires_at < earliest:
                    earliest = expires_at
        to_send.earliest = earliest
        sink = _metrics.sink
        if sink is not None and to_send:
            # The most overdue lock of the round: the one a slow renewer puts at risk first.
            due = min(lease.expires_at - lease.renewal.renew_before for lease in to_send if lease.renewal)
            sink.renewal_lag(max(0.0, now - due))
        return to_send, lost

    def round_deadline(self, leases: Sequence[Lease], now: float, timeout: float) -> float:
        """A round waits no longer than ``timeout``, nor past the earliest expiry of its leases
        (less the time to settle), so a loss is signalled before the lease's own expiry. Asked
        before the round's own commands are counted as sent: those only set later expiries."""
        earliest: float
        if type(leases) is DueLeases and leases.changes == belief_changes():
            earliest = leases.earliest  # nothing lowered any lease's expiry since take_due read them
        else:
            earliest = min(map(_expires_at, leases))
        return min(now + timeout, earliest - SETTLE_MARGIN - marking(len(leases)))

    def sending(self, batch: Sequence[Lease], ttl_ms: int, sent_at: float) -> None:
        """A renewal of ``batch`` with ``ttl_ms`` is about to be written."""
        if batch:
            commands_sent(batch, sent_at, batch[0].expiry_after(sent_at, ttl_ms))

    def renewed(self, leases: Sequence[Lease], sent_at: float, ttl_ms: int) -> None:
        """The server renewed these: new belief and next due time."""
        beliefs = commands_ran(leases, sent_at, ttl_ms, renewal=True)
        with self._lock:
            schedule = self._wheel.schedule
            for lease, expires_at in zip(leases, beliefs, strict=True):
                state = lease.renewal
                if state is None or state.released:
                    continue
                state.renewals += 1
                when = expires_at - state.terms.renew_before
                schedule(state.id, when if when > sent_at else _capped_due(state, expires_at, sent_at))

    def settle(self, batch: list[Lease], failed: list[tuple[int, object]], sent_at: float,
               ttl_ms: int) -> tuple[list[Lease], list[tuple[Lease, object]]]:
        """A batch's renewal from what failed in it (``outcomes.failures``: (position, outcome),
        0 not ours; anything else, such as a Redis Cluster node that did not answer for some of
        the keys, undecided), every other lease renewed: the lost leases, and the undecided ones
        with their outcomes."""
        if not failed:  # the usual round
            self.renewed(batch, sent_at, ttl_ms)
            return [], []
        lost: list[Lease] = []
        undecided: list[tuple[Lease, object]] = []
        for position, outcome in failed:
            if type(outcome) is int:
                lost.append(batch[position])
            else:
                undecided.append((batch[position], outcome))
        commands_refused(lost, sent_at)
        positions = {position for position, _ in failed}
        self.renewed([lease for position, lease in enumerate(batch) if position not in positions], sent_at,
                     ttl_ms)
        return lost, undecided

    def failed(self, batch: Sequence[Lease], sent_at: float | None, now: float,
               sent: bool = True) -> list[Lease]:
        """No answer for ``batch`` (sent, or not sent or refused with an error: ``sent=False``;
        ``sent_at=None`` when the round broke without telling): retried soon, never after the
        point where its loss must be declared; the leases already past that point."""
        if sent_at is None:
            commands_abandoned(batch)
        elif sent:
            commands_unknown(batch, sent_at)
        else:
            commands_refused(batch, sent_at)
        guard = self.loss_guard + marking(len(batch))  # as the round's deadline: a retry has time to run
        past: list[Lease] = []
        with self._lock:
            wheel = self._wheel
            for lease in batch:
                state = lease.renewal
                if state is None or state.released:
                    continue
                last_chance = lease.expires_at - guard
                if last_chance <= now:
                    past.append(lease)
                else:
                    wheel.schedule(state.id, min(now + max(WHEEL_TICK, min(state.renew_before / 4, 1.0)),
                                                 last_chance))
        return past

    def cut_short(self, batch: Sequence[Lease], sent_at: float) -> None:
        """A round cut short (cancelled: a stop, or its asyncio loop ended; interrupted) with
        ``batch`` sent: as ``failed``, but those already past their last chance are due at once,
        for the next wake-up to renew or declare lost (the round declares nothing itself: a
        stop's close() releases them, a loop that ended leaves them to the renewer's next)."""
        now = time.monotonic()
        past = self.failed(batch, sent_at, now)
        with self._lock:
            for lease in past:
                state = lease.renewal
                if state is not None and not state.released:
                    self._wheel.schedule(state.id, now)

    def refused(self, batch: Sequence[Lease], sent_at: float) -> None:
        """These leases' renewal found them not ours: the belief stands until they are lost."""
        commands_refused(batch, sent_at)

    def lose(self, lease: Lease, reason: str) -> RenewalState | None:
        """Forget a lost lease and mark it lost; its state when this is news (signal and log it
        then: ``lose_together``). One no longer renewed (a release of it was tried, and failed
        before it was sent) is marked lost all the same, without a signal: the server said it
        is not ours."""
        state = lease.renewal
        if state is None:
            return None
        with self._lock:
            forgotten = state.released
            state.released = True  # forgotten: not renewed, nor released if the program drops it
            self._wheel.cancel(state.id)
            self._held.pop(state.id, None)
        if not lease.mark_lost(reason) or forgotten:
            return None
        return state

    def _schedule(self, state: RenewalState, when: float) -> None:
        with self._lock:
            if not state.released:
                self._wheel.schedule(state.id, when)

    def forget_after_fork(self, now: float) -> None:
        """In a forked child: the parent's locks are not ours to renew, nor to release when the
        child drops a lease it inherited (its state's weak reference still calls back here)."""
        for state in self._held.values():
            state.released = True
        self._lock = threading.Lock()
        self._held.clear()
        self._collected.clear()
        self._wheel = self._core.TimerWheel(WHEEL_TICK, WHEEL_SLOTS, now)


def _capped_due(state: RenewalState, expires_at: float, since: float) -> float:
    """When to renew a lease whose belief, from ``since``, is shorter than its margin: capped by
    a renewal that got no reply and may still run (``lease._ghost``: it would set its own, shorter
    ttl), whatever ttl later commands set. Renewing at once would leave it as short again: it is
    renewed at the pace of that shorter ttl instead, each renewal restoring the longer one on
    the server should the old one run."""
    life_ms = max(1, int((expires_at - since) * 1000))
    return expires_at - state.terms.for_ttl(life_ms).renew_before


def _alive(state: RenewalState) -> Lease | None:
    lease: Lease | None = state()
    return lease


def limit_reached(lease: Lease, state: RenewalState, now: float) -> bool:
    """Whether one more renewal would pass the lock's max_renewals or max_hold."""
    if now + lease.ttl_ms / 1000.0 > state.hold_until:
        return True
    most = state.terms.max_renewals
    return most is not None and state.renewals >= most


def no_reply(reply: object) -> bool:
    return reply is UNKNOWN or reply is NOT_SENT
