"""What a successful acquire hands back: the lock name, its hidden token and its local expiry.

A lease's belief about its expiry must never run past the key's real expiry on the server.
Commands that set the ttl (extend, renewal) can be in flight together on different connections
and run on the server in any order, so a command's success alone does not tell which ttl the
key has now: the last one to *run* wins, not the last one to answer. When a command succeeds,
the lease believes the earliest ``sent_at + ttl`` among it and every command that may have run
after it (those still in flight, and those that answered after it was sent); while a command
that would shorten the lock is in flight, the lease believes that already
(``commands_sent`` and friends below).
"""

from __future__ import annotations

import math
import operator
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from turbolock import _metrics
from turbolock._wire import core as _core
from turbolock._wire.validate import encode_name, encode_names
from turbolock.errors import LockLostError

if TYPE_CHECKING:
    from turbolock._flows.renewal_book import RenewalState


class Lease:
    """Proof of holding one lock, valid on the client (and in the process) that made it.

    ``acquired_at`` is the monotonic time the acquiring (or last extending or renewing) command
    was *sent*, so ``valid_for()`` never overestimates: the server started the ttl later than
    that. The token is never shown in a repr.
    """

    __slots__ = ("_name", "token", "ttl_ms", "acquired_at", "owner", "renewal", "_lost", "_lost_event",
                 "_expires", "_flight", "_ghost", "__weakref__")

    fence: int | None = None
    """The fencing token of a ``fenced=True`` acquire (``FencedLease``); None for the others."""

    def __init__(self, name: str | bytes, token: bytes, ttl_ms: int, acquired_at: float,
                 owner: object) -> None:
        # Assignments only, LEASE_VALUES from the arguments and LEASE_EMPTY None: the compiled
        # core makes a bulk acquire's leases by writing these slots without calling __init__.
        self._name = name
        self.token = token
        self.ttl_ms = ttl_ms
        self.acquired_at = acquired_at
        self.owner = owner
        self.renewal: RenewalState | None = None
        self._lost: str | None = None
        self._lost_event: threading.Event | _LostSignal | Callable[[Any], object] | None = None
        """The ``lost`` event (made on first use), the ``on_lost`` callback, or both."""
        # None until a command after the acquire settles: acquired_at + ttl then (a float per
        # lease would cost 24 bytes each in a bulk acquire; settled ones share their batch's).
        self._expires: float | None = None
        # Commands in flight that set the key's ttl, (sent_at, expiry): one as it is, several in
        # a _Flight (which keeps the ones that answered while others were in flight too).
        self._flight: tuple[float, float] | _Flight | None = None
        # The shortest ttl of a command whose reply was lost: it may still run on the server
        # (its bytes waiting in a stopped server's buffer) after any later command.
        self._ghost: float | None = None

    @property
    def name(self) -> str | bytes:
        """The lock's name, as given to the acquire. Read-only: every command of this lease
        goes to the key made from it, with a token that its chunk's other locks may share."""
        return self._name

    @property
    def key(self) -> bytes:
        """The name as sent (before the client's key prefix), made again on each use: a held
        lease is a third smaller without its own copy (``keys_of`` makes many at once)."""
        return encode_name(self._name)

    def expiry_after(self, sent_at: float, ttl_ms: int) -> float:
        """Where a command sent at ``sent_at`` that sets ``ttl_ms`` leaves this lease's belief."""
        return sent_at + ttl_ms / 1000.0

    @property
    def ttl(self) -> float:
        """The ttl of the last acquire, extend or renewal, in seconds."""
        return self.ttl_ms / 1000.0

    @property
    def expires_at(self) -> float:
        """Monotonic time until which the lock is certainly still on the server (unless someone
        deleted it); the earliest of what the commands still in flight may leave it at."""
        # Read without the lock, flight first: a landing command lowers _expires before it
        # leaves the flight, so either snapshot still holds it or _expires already says it.
        flight = self._flight
        expires = self._expires
        if expires is None:
            expires = self.expiry_after(self.acquired_at, self.ttl_ms)
        if flight is None:
            return expires
        if isinstance(flight, tuple):
            return flight[1] if flight[1] < expires else expires
        for _, expiry in tuple(flight):  # a copy: another thread may be settling one of them
            if expiry < expires:
                expires = expiry
        return expires

    def valid_for(self) -> float:
        """Seconds left before the lock may expire, by the local clock (0 once lost or past, and
        in a forked child: the lock is its parent's)."""
        if self._lost is not None or getattr(self.owner, "pid", _pid) != _pid:
            return 0.0
        return max(0.0, self.expires_at - time.monotonic())

    @property
    def auto_renew(self) -> bool:
        """Whether the client's renewer keeps extending this lease."""
        return self.renewal is not None

    @property
    def is_lost(self) -> bool:
        """True once turbolock knows the lock is gone (renewal failed, or it ran out)."""
        return self._lost is not None

    @property
    def lost_reason(self) -> str | None:
        return self._lost

    @property
    def lost(self) -> threading.Event:
        """An event set when the lock is found lost (for auto-renewed leases, by the renewer)."""
        signal = self._lost_event
        if isinstance(signal, threading.Event):
            return signal
        if isinstance(signal, _LostSignal):
            return signal.event
        event = threading.Event()
        self._lost_event = event if signal is None else _LostSignal(event, signal)
        if _core.core_c is not None:  # user code can reach the event, and through it this lease
            _core.core_c.track(self)
        if self._lost is not None:
            event.set()
        return event

    def _on_lost(self) -> Callable[[Any], object] | None:
        """The ``on_lost`` of an auto-renewed lease (``keep_on_lost``), or None."""
        signal = self._lost_event
        if signal is None or isinstance(signal, threading.Event):
            return None
        return signal.on_lost if isinstance(signal, _LostSignal) else signal

    def ensure_held(self) -> None:
        """Raise ``LockLostError`` unless the lock is still ours by the local clock (not lost,
        not released, not past its ttl).

        Cheap (no round trip): call it right before acting on what the lock protects.
        """
        if self._lost is not None:
            raise LockLostError(f"lock {self.name!r} was lost: {self._lost}", names=[self.name])
        if getattr(self.owner, "pid", _pid) != _pid:
            raise LockLostError(f"lock {self.name!r} was acquired in another process (before a fork): "
                                "it is that process's", names=[self.name])
        if self._expires == RELEASED:
            raise LockLostError(f"lock {self.name!r} was released", names=[self.name])
        if self.expires_at <= time.monotonic():
            raise LockLostError(f"lock {self.name!r} has run past its ttl and may be someone else's",
                                names=[self.name])

    def mark_lost(self, reason: str) -> bool:
        """Record the loss (first reason wins) and set the event; False when already lost, or
        released (a release answered stays so, whatever is heard of its key after it)."""
        if self._lost is not None or self._expires == RELEASED:
            return False
        self._lost = reason
        signal = self._lost_event
        if isinstance(signal, threading.Event):
            signal.set()
        elif isinstance(signal, _LostSignal):
            signal.event.set()
        sink = _metrics.sink
        if sink is not None:
            sink.lost(self.name)
        return True

    def __repr__(self) -> str:
        state = f", lost={self._lost!r}" if self._lost is not None else ""
        renew = ", auto_renew=True" if self.renewal is not None else ""
        fence = f", fence={self.fence}" if self.fence is not None else ""
        return (f"Lease(name={self.name!r}, ttl={self.ttl:g}, valid_for={self.valid_for():.3f}{fence}{renew}"
                f"{state})")


RELEASED = -math.inf
"""A released lease's belief (``_expires``): no time left, whatever was in flight."""


_EXPIRES: Any = Lease.__dict__["_expires"]
"""The slot a released lease's belief is written to, for the core's one pass over many."""


def lease_released(lease: Lease, released: bool) -> None:
    """A release answered: a lease released has no time left (``valid_for()`` 0,
    ``ensure_held()`` raises); one the server said was not ours is lost (a lease released
    before, answered again, stays released)."""
    if released:
        with _belief_lock:  # so a success settled at the same time (a renewal's) cannot undo it
            lease._expires = RELEASED
    else:
        lease.mark_lost("a release found its key gone or held by another token")


def leases_released(core: Any, leases: list[Lease], released: Sequence[bool]) -> None:
    """``lease_released`` for a bulk release's leases (the usual case in one pass of ``core``)."""
    if all(released):
        with _belief_lock:
            core.set_slot(leases, _EXPIRES, RELEASED)
        return
    for lease, done in zip(leases, released, strict=True):
        lease_released(lease, done)


LEASE_VALUES = ("_name", "token", "ttl_ms", "acquired_at", "owner")
"""The slots ``Lease.__init__`` sets from its arguments, in their order."""
LEASE_EMPTY = ("renewal", "_lost", "_lost_event", "_expires", "_flight", "_ghost")
"""The slots ``Lease.__init__`` sets to None."""

_name_of = operator.attrgetter("_name")


def keys_of(leases: Iterable[Lease], core: Any) -> list[bytes]:
    """Each lease's ``key``, as its acquire made it (``encode_names`` in one pass of ``core``,
    the client's, when every name is exactly a str or bytes; a subclass's own ``encode``
    otherwise)."""
    return encode_names(list(map(_name_of, leases)), "leases", core)[0]


_belief_lock = threading.Lock()
"""Guards the belief of every lease: a renewal thread and the caller's own extend may settle one
lease at the same time. Held for a few attribute updates per lease."""


_pid = os.getpid()
"""This process's id, kept current across forks (``os.getpid()`` is a system call)."""


def _after_fork_in_child() -> None:
    global _belief_lock, _pid
    _pid = os.getpid()
    # Another thread of the parent may have held it at the fork: it would never be let go here.
    _belief_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
_belief_changes = 0
"""Calls that may have lowered some lease's ``expires_at`` so far (counted under the lock)."""


def belief_changes() -> int:
    """How many calls so far may have lowered some lease's ``expires_at``: an earliest expiry
    read over many leases holds while this stays the same (``RenewalBook.round_deadline``)."""
    return _belief_changes


class _Flight(list[tuple[float, float]]):
    """A lease's commands in flight once more than one was, (sent_at, expiry), and in ``past``
    those that answered while others were in flight, (answered_at, expiry): one of those still
    in flight may have run before them. Rare, so kept off the lease itself."""

    __slots__ = ("past",)

    def __init__(self, entries: Iterable[tuple[float, float]]) -> None:
        super().__init__(entries)
        self.past: list[tuple[float, float]] | None = None


def _believed(lease: Lease) -> float:
    """The expiry the settled commands left, before any still in flight."""
    expires = lease._expires
    if expires is None:
        return lease.expiry_after(lease.acquired_at, lease.ttl_ms)
    return expires


def commands_sent(leases: Iterable[Lease], sent_at: float, expiry: float) -> None:
    """Commands sent at ``sent_at`` that set each lease's key to live until ``expiry`` at the
    earliest are on their way."""
    global _belief_changes
    entry = (sent_at, expiry)
    with _belief_lock:
        _belief_changes += 1
        for lease in leases:
            flight = lease._flight
            if flight is None:  # the usual case: one command at a time, kept as it is
                lease._flight = entry
            elif isinstance(flight, tuple):
                lease._flight = _Flight((flight, entry))
            else:
                flight.append(entry)


def _take(lease: Lease, sent_at: float) -> float | None:
    """Take the command sent at ``sent_at`` out of the lease's flight; its expiry (None when it
    was not counted as sent). Called once the belief has taken it into account."""
    flight = lease._flight
    if flight is None:
        return None
    if isinstance(flight, tuple):
        if flight[0] != sent_at:
            return None
        lease._flight = None
        return flight[1]
    for i, (sent, expiry) in enumerate(flight):
        if sent == sent_at:
            del flight[i]
            return expiry
    return None


def _expiry_of(lease: Lease, sent_at: float) -> float | None:
    flight = lease._flight
    if isinstance(flight, tuple):
        return flight[1] if flight[0] == sent_at else None
    for sent, expiry in flight or ():
        if sent == sent_at:
            return expiry
    return None


def _remember(lease: Lease, now: float, expiry: float) -> None:
    """Keep a settled command in view while others are in flight: one may have run before it."""
    flight = lease._flight
    if not flight:
        lease._flight = None
        return
    if isinstance(flight, tuple):
        flight = lease._flight = _Flight((flight,))
    oldest = min(sent for sent, _ in flight)
    past = [(at, e) for at, e in flight.past or () if at >= oldest]  # older ones ran before all of these
    past.append((now, expiry))
    flight.past = past


class _LostSignal:
    """A lease's ``lost`` event beside its ``on_lost`` callback, when it has both (one slot)."""

    __slots__ = ("event", "on_lost")

    def __init__(self, event: threading.Event, on_lost: Callable[[Any], object]) -> None:
        self.event = event
        self.on_lost = on_lost


def keep_on_lost(lease: Lease, on_lost: Callable[[Any], object]) -> None:
    """Give an auto-renewed ``lease`` its ``on_lost``, kept by the lease alone (in the slot of its
    ``lost`` event): the renewer holds leases weakly, so a callback that reaches its lease back
    (a bound method of the object that keeps the lease) does not keep that lease renewed after
    the program dropped both."""
    event = lease._lost_event
    if event is None or isinstance(event, threading.Event):
        lease._lost_event = on_lost if event is None else _LostSignal(event, on_lost)
        if _core.core_c is not None:  # the cycle collector must see lease -> on_lost -> lease
            _core.core_c.track(lease)


def commands_ran(leases: Iterable[Lease], sent_at: float, ttl_ms: int, renewal: bool = False) -> list[float]:
    """Each lease's command succeeded. The key now lives until its expiry, unless a command that
    may have run after it says less: one still in flight, or one that answered after this one
    was sent. The belief is the earliest of those. The beliefs, in order (each lease's
    ``expires_at`` as the call leaves it). A ``renewal`` repeats the lease's ttl and leaves it
    as it is: an extend to another ttl answered meanwhile is what the program asked for last."""
    global _belief_changes
    now = 0.0
    beliefs: list[float] = []
    believe = beliefs.append
    with _belief_lock:
        _belief_changes += 1
        for lease in leases:
            flight = lease._flight
            if lease._expires is RELEASED:  # a release answered while this was in flight: it stays so
                believe(RELEASED)
                _take(lease, sent_at)
                continue
            if isinstance(flight, tuple) and flight[0] == sent_at and lease._ghost is None:
                believe(flight[1])
                lease._expires = flight[1]  # alone in flight: believed as it is
                lease._flight = None
                if sent_at > lease.acquired_at:  # one sent before the last one settled says nothing newer
                    lease.acquired_at = sent_at
                if not renewal:
                    lease.ttl_ms = ttl_ms
                continue
            expiry = _expiry_of(lease, sent_at)
            if expiry is None:  # not counted as sent (a caller's slip): this command alone
                expiry = lease.expiry_after(sent_at, ttl_ms)
            belief = expiry
            for at, e in (flight.past if type(flight) is _Flight else None) or ():
                if at > sent_at and e < belief:
                    belief = e
            others = (flight,) if isinstance(flight, tuple) else flight or ()
            for _, e in others:
                if e < belief:
                    belief = e
            ghost = lease._ghost
            if ghost is not None and sent_at + ghost < belief:
                belief = sent_at + ghost
            believe(belief)
            lease._expires = belief
            if sent_at > lease.acquired_at:
                lease.acquired_at = sent_at
            if not renewal:
                lease.ttl_ms = ttl_ms
            _take(lease, sent_at)
            now = now or time.monotonic()
            _remember(lease, now, expiry)
    return beliefs


def _haunt(lease: Lease, ttl: float) -> None:
    """A command with ``ttl`` may still run at any time: no later success believes more than
    its own send time plus that ttl."""
    if lease._ghost is None or ttl < lease._ghost:
        lease._ghost = ttl


def commands_unknown(leases: Iterable[Lease], sent_at: float) -> None:
    """No reply: each command may or may not have run, so the belief can only go down."""
    global _belief_changes
    now = time.monotonic()
    with _belief_lock:
        _belief_changes += 1
        for lease in leases:
            expiry = _expiry_of(lease, sent_at)
            if expiry is None:
                continue
            if expiry < _believed(lease):
                lease._expires = expiry
            _haunt(lease, expiry - sent_at)
            _take(lease, sent_at)
            _remember(lease, now, expiry)


def commands_refused(leases: Iterable[Lease], sent_at: float) -> None:
    """Each command did not change the key (an error reply, or the lock was not ours any more)."""
    with _belief_lock:
        for lease in leases:
            if _take(lease, sent_at) is not None and not lease._flight:
                lease._flight = None


def commands_abandoned(leases: Iterable[Lease]) -> None:
    """Whatever was in flight for each lease is given up on (the round that sent it failed):
    any of it may have run, so the belief goes down to the earliest of it."""
    with _belief_lock:
        for lease in leases:
            flight = lease._flight
            if flight is None:
                continue
            entries = (flight,) if isinstance(flight, tuple) else flight
            lease._expires = min(_believed(lease), min((e for _, e in entries), default=_believed(lease)))
            for sent, e in entries:
                _haunt(lease, e - sent)
            lease._flight = None


class FencedLease(Lease):
    """A lease with its fencing token: a number per lock name that grows with every grant,
    expiries included. Hand it to the resource the lock protects, which refuses any operation
    with a lower fence than one it has seen (``turbolock.fencing``): a holder that paused past its
    ttl is then refused instead of overwriting its successor's work."""

    __slots__ = ("fence",)

    def __init__(self, name: str | bytes, token: bytes, ttl_ms: int, acquired_at: float,
                 owner: object, fence: int) -> None:
        super().__init__(name, token, ttl_ms, acquired_at, owner)
        self.fence = fence


class LockInfo(NamedTuple):
    """What ``query`` tells about a name: whether anyone holds it, and for how long still.

    ``remaining`` is in seconds, None when the lock is free, ``math.inf`` for a key with no
    expiry (never one turbolock made). Whose it is, is never revealed.
    """

    held: bool
    remaining: float | None


FREE = LockInfo(False, None)


def info_from_pttl(pttl: int) -> LockInfo:
    if pttl == -2:
        return FREE
    if pttl == -1:
        return LockInfo(True, math.inf)
    return LockInfo(True, pttl / 1000.0)
