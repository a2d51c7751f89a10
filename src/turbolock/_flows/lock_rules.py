"""What every Lock object (threaded, asyncio, Redlock) shares and that needs no I/O: its
settings and their defaults, how long a blocking acquire waits and how long each attempt may
take, and the state it keeps about the lock it holds. Each front end adds only the calls.

The defaults, the same everywhere: no ttl means ``DEFAULT_TTL`` seconds renewed until release
(Redisson's watchdog); ``blocking=True`` with ``timeout=None`` waits until the lock is free;
``timeout=0`` or ``blocking=False`` makes exactly one attempt.
"""

from __future__ import annotations

import time
from typing import Any, Generic, TypeVar

from turbolock._flows.backoff import Backoff
from turbolock._wire.validate import Seconds, check_flag, check_token, encode_name, timeout_seconds, ttl_ms
from turbolock.errors import (
    ClusterError,
    ConnectionError,
    InvalidArgumentError,
    LockLostError,
    LockNotOwnedError,
    LockUsageError,
    OutcomeUnknownError,
    SlotMovingError,
    TimeoutError,
)
from turbolock.lease import Lease

DEFAULT_TTL = 30
"""Seconds a lock taken with no ttl lives between renewals (it is renewed until released)."""

FIRST_ATTEMPT_FLOOR = 0.01
"""A blocking acquire's first attempt gets at least this long, however short its wait."""

WOKEN_POLL_FIRST = 0.1
WOKEN_POLL_MAX = 0.2
"""A waiter woken by releases still polls: every 50-100 ms, then every 100-200 ms (a lock whose
holder crashed is taken within its ttl and one such pause)."""

JOIN_PATIENCE = 0.25
"""Seconds a new waiter waits for its subscription to be confirmed before it polls (it is still
woken if the confirmation comes later): a subscriber connection gone silent (a NAT or firewall
dropping it without a reset) holds no waiter up for a whole call timeout."""

LeaseT = TypeVar("LeaseT", bound=Lease)


def lock_ttl(ttl: Seconds | None, auto_renew: Any) -> tuple[Seconds, Any]:
    """The ttl and auto_renew of a Lock: no ttl means ``DEFAULT_TTL`` with renewal (unless
    ``auto_renew`` says otherwise); ``auto_renew=None`` means "renew when no ttl was given"."""
    if ttl is None:
        return DEFAULT_TTL, True if auto_renew is None else auto_renew
    return ttl, False if auto_renew is None else auto_renew


def check_wait(blocking: object, timeout: object) -> float | None:
    """The wait of an acquire: None forever, 0 a single attempt. ``blocking=False`` with a
    positive ``timeout`` contradicts itself and is refused."""
    check_flag(blocking, "blocking")
    wait = timeout_seconds(timeout)
    if not blocking:
        if wait:
            raise InvalidArgumentError(
                "blocking", f"blocking=False (one attempt) contradicts timeout={timeout!r} (a wait); "
                            "pass one of the two")
        return 0.0
    return wait


SLOT_MOVE_PATIENCE = 30.0
"""How long a wait with no end goes on through a Redis Cluster slot being moved (TRYAGAIN to a
fenced or fair lock's script): a reshard moves a slot in far less; one abandoned half-way (the
slot left MIGRATING/IMPORTING until an operator fixes it) then ends the wait with its
``SlotMovingError`` instead of hanging it silently."""


def worth_retrying(error: BaseException, wait: float | None, slot_moving_for: float = 0.0) -> bool:
    """Whether a blocking acquire goes on waiting after ``error``: a lost reply (the lock is
    released in the background) always; a server that cannot be reached or does not answer
    only while the wait has an end, so an endless wait never hides an outage. A Redis Cluster
    slot being moved (``SlotMovingError``, for ``slot_moving_for`` seconds so far) is waited
    through like a held lock, by an endless wait for ``SLOT_MOVE_PATIENCE``; a cluster being
    changed (``ClusterError``: a slot with no master during a failover, no slot map yet) as a
    server that cannot be reached. Refused credentials and a server that is not Redis always
    end it."""
    if isinstance(error, OutcomeUnknownError) or (
            isinstance(error, SlotMovingError) and slot_moving_for < SLOT_MOVE_PATIENCE):
        return wait != 0.0
    return bool(wait) and (isinstance(error, TimeoutError | ClusterError) or type(error) is ConnectionError)


class Waiting:
    """One blocking acquire's clock: each attempt ends by the call deadline or the end of the
    wait, whichever comes first, and the pauses between attempts back off with jitter."""

    __slots__ = ("deadline", "_backoff", "_first", "_moving_since")

    def __init__(self, wait: float | None, backoff: Backoff | None = None) -> None:
        self.deadline = None if wait is None else time.monotonic() + wait
        self._backoff = Backoff() if backoff is None else backoff
        self._first = True
        self._moving_since: float | None = None

    def slot_moving_for(self, error: BaseException) -> float:
        """How long attempts have met a moving slot (``SlotMovingError``), ``error`` the latest
        attempt's: since the first of a run of them, 0 after any other error."""
        if not isinstance(error, SlotMovingError):
            self._moving_since = None
            return 0.0
        now = time.monotonic()
        if self._moving_since is None:
            self._moving_since = now
        return now - self._moving_since

    def attempt_deadline(self, call_timeout: float) -> float | None:
        """When the next attempt must end, or None when the call's own deadline comes first."""
        first, self._first = self._first, False
        if self.deadline is None:
            return None
        now = time.monotonic()
        end = max(self.deadline, now + FIRST_ATTEMPT_FLOOR) if first else self.deadline
        return end if end < now + call_timeout else None

    def woken_by_release(self) -> None:
        """The waiter is now woken when the lock is released: polling is only the safety net
        (a holder that crashed, an expiry, a lost message), so its pauses are longer."""
        self._backoff = Backoff(WOKEN_POLL_FIRST, WOKEN_POLL_MAX, floor=0.5)

    def join_deadline(self, call_timeout: float, limit: float = JOIN_PATIENCE) -> float:
        """How long subscribing to the release of the lock may take: ``limit`` seconds (a fair
        waiter's own: it must ask again before its place goes), the call's deadline if shorter,
        or the end of the wait if that comes first."""
        end = time.monotonic() + min(call_timeout, limit)
        return end if self.deadline is None else min(end, self.deadline)

    def within(self, seconds: float) -> float:
        """``seconds``, or what is left of the wait if that is less."""
        if self.deadline is None:
            return seconds
        return max(0.0, min(seconds, self.deadline - time.monotonic()))

    def over(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def pause(self) -> float | None:
        """Seconds to sleep before the next attempt, or None when the wait is over."""
        if self.deadline is None:
            return self._backoff.next_delay(None)
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return None
        return self._backoff.next_delay(remaining)


StateT = TypeVar("StateT", bound="LockState[Any]")


class LockState(Generic[LeaseT]):
    """The part of a Lock object that needs no I/O: checked settings and the lease it holds.

    Ownership belongs to the object (it holds the lease and its token), never to a thread or
    a task: a Lock acquired in one may be released in another, and two Lock objects on one
    name exclude each other even in the same thread.
    """

    kind = "Lock"
    client: Any
    """The client the Lock object was made by (``client.lock(...)``)."""

    def _setup(self, name: str | bytes, ttl: Seconds, blocking: bool, timeout: Seconds | None,
               token: bytes | None, auto_renew: Any, on_lost: Any) -> None:
        encode_name(name)
        self._ttl_ms = ttl_ms(ttl)
        self._wait = check_wait(blocking, timeout)
        if token is not None:
            check_token(token)
        self.name = name
        self.ttl = ttl
        self.blocking = blocking
        self.timeout = timeout
        self._token = token
        self.auto_renew = auto_renew
        self.on_lost = on_lost
        self._lease: LeaseT | None = None
        self._first: Any = None
        self._blocks: dict[object, tuple[Any, Any]] | None = None

    def _wait_for(self, blocking: bool | None, timeout: Seconds | None) -> float | None:
        """The wait of one acquire() call, from its arguments or the Lock's settings."""
        if blocking is None and timeout is None:
            return self._wait
        if blocking is None:
            blocking = self.blocking if timeout is None else True
        return check_wait(blocking, timeout if timeout is not None else (self.timeout if blocking else None))

    @property
    def lease(self) -> LeaseT | None:
        """The current lease, or None when this object does not hold the lock."""
        return self._lease

    # The leases the open ``with`` blocks entered with, so a block's exit gives back its own
    # lease, never one another thread or task took after it: ``_first``, of a block opened when
    # none was; ``_blocks``, of those opened while one was, per thread or task (``_block_owner``),
    # each over the one its owner entered before (nested blocks). Asked for only while two are
    # open (a Lock object is often made, entered and left once: no owner is looked up then).
    # Instance attributes, set by ``_setup``: one found on the class is read unspecialised on
    # CPython 3.11, and these are read on every exit (a measured 0.4 us a pair of an AsyncLock).

    def _block_owner(self) -> object:
        """Whose ``with`` block runs now: the thread's or the task's."""
        raise NotImplementedError

    def _check_unheld(self) -> None:
        lease = self._lease  # one known lost does not count (``on_lost`` and ``lost`` said so)
        if lease is not None and lease._lost is None:
            raise LockUsageError(f"lock {self.name!r} is already held by this {self.kind} object",
                                 names=[self.name])

    def _held_lease(self) -> LeaseT:
        lease = self._lease
        if lease is None:
            raise LockUsageError(f"lock {self.name!r} is not held by this {self.kind} object",
                                 names=[self.name])
        return lease

    def _drop(self, lease: LeaseT) -> None:
        if self._lease is lease:
            self._lease = None

    def valid_for(self) -> float:
        """Seconds the lock is safely ours by the local clock (0 when not held or lost); no round trip."""
        lease = self._lease
        return 0.0 if lease is None else lease.valid_for()

    def ensure_held(self) -> None:
        """``LockLostError`` unless this object holds the lock by the local clock; no round trip.
        Call it right before acting on what the lock protects."""
        lease = self._lease
        if lease is None:
            raise LockLostError(f"lock {self.name!r} is not held by this {self.kind} object",
                                names=[self.name])
        lease.ensure_held()

    def _not_acquired_message(self) -> str:
        wait = self._wait
        waited = f" within {wait:g}s" if wait else ""
        return f"lock {self.name!r} was not acquired{waited}"

    def _exit_check(self, exc_type: type[BaseException] | None) -> bool:
        """At the end of a ``with`` block: True when there is a lease to release. A lock released
        inside the block is a usage error, reported unless the block itself raised."""
        blocks = self._blocks
        entry = blocks.pop(self._block_owner(), None) if blocks else None
        if entry is None:  # the block opened first (or a with statement it did not enter)
            entered, self._first = self._first, None
        else:
            entered, below = entry
            if below is not None:  # the block this one was nested in
                blocks[self._block_owner()] = below  # type: ignore[index]
        lease = self._lease
        if lease is not None and (entered is None or lease is entered):
            return True
        if entered is not None and exc_type is None:
            if entered._lost is not None:  # found gone in the block: the loss, not a misuse
                raise LockNotOwnedError(f"lock {self.name!r} was lost inside its with block (found lost: "
                                        f"{entered._lost})", names=[self.name])
            raise LockUsageError(f"lock {self.name!r} was released inside its with block", names=[self.name])
        return False

    def _settings(self) -> dict[str, Any]:
        return {"blocking": self.blocking, "timeout": self.timeout, "token": self._token,
                "auto_renew": self.auto_renew, "on_lost": self.on_lost}

    def copy(self: StateT) -> StateT:
        """A new, unheld Lock object with the same settings."""
        kind: Any = type(self)
        copied: StateT = kind(self.client, self.name, self.ttl, **self._settings())
        return copied

    # copy.copy / copy.deepcopy: an unheld Lock as well (ownership belongs to one Lock object; a
    # copy sharing its lease could release it while the original still said it held it).
    def __copy__(self: StateT) -> StateT:
        return self.copy()

    def __deepcopy__(self: StateT, memo: dict[int, Any]) -> StateT:
        return self.copy()

    def __reduce__(self) -> Any:
        # pickle: a lease and a client cannot go to another process (its token would be used twice).
        raise LockUsageError(f"a {self.kind} object cannot be pickled: make one with client.lock(...) in the "
                             "process that uses it", names=[self.name])

    def __repr__(self) -> str:
        lease = self._lease  # one known lost does not count, as for acquire() (``_check_unheld``)
        held = lease is not None and lease._lost is None
        return f"{self.kind}(name={self.name!r}, ttl={self.ttl!r}, held={held})"
