"""What a successful acquire hands back: the lock name, its hidden token and its local expiry."""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING, NamedTuple

from .errors import LockLostError

if TYPE_CHECKING:
    from .renewal import RenewalState


class Lease:
    """Proof of holding one lock, valid on the client (and in the process) that made it.

    ``acquired_at`` is the monotonic time the acquiring (or last extending or renewing) command
    was *sent*, so ``valid_for()`` never overestimates: the server started the ttl later than
    that. The token is never shown in a repr.
    """

    __slots__ = ("name", "key", "token", "ttl_ms", "acquired_at", "owner", "renewal", "_lost", "_lost_event")

    def __init__(self, name: str | bytes, key: bytes, token: bytes, ttl_ms: int, acquired_at: float,
                 owner: object) -> None:
        self.name = name
        self.key = key
        self.token = token
        self.ttl_ms = ttl_ms
        self.acquired_at = acquired_at
        self.owner = owner
        self.renewal: RenewalState | None = None
        self._lost: str | None = None
        self._lost_event: threading.Event | None = None

    @property
    def ttl(self) -> float:
        """The ttl of the last acquire, extend or renewal, in seconds."""
        return self.ttl_ms / 1000.0

    @property
    def expires_at(self) -> float:
        """Monotonic time by which the server has certainly expired the lock unless extended."""
        return self.acquired_at + self.ttl_ms / 1000.0

    def valid_for(self) -> float:
        """Seconds left before the lock may expire, by the local clock (0 once lost or past)."""
        if self._lost is not None:
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
        event = self._lost_event
        if event is None:
            event = threading.Event()
            self._lost_event = event
            if self._lost is not None:
                event.set()
        return event

    def ensure_held(self) -> None:
        """Raise ``LockLostError`` unless the lock is still ours by the local clock.

        Cheap (no round trip): call it right before acting on what the lock protects.
        """
        if self._lost is not None:
            raise LockLostError(f"lock {self.name!r} was lost: {self._lost}")
        if self.expires_at <= time.monotonic():
            raise LockLostError(f"lock {self.name!r} has run past its ttl and may be someone else's")

    def mark_lost(self, reason: str) -> bool:
        """Record the loss (first reason wins) and set the event; False when already lost."""
        if self._lost is not None:
            return False
        self._lost = reason
        event = self._lost_event
        if event is not None:
            event.set()
        return True

    def __repr__(self) -> str:
        state = f", lost={self._lost!r}" if self._lost is not None else ""
        renew = ", auto_renew=True" if self.renewal is not None else ""
        return f"Lease(name={self.name!r}, ttl={self.ttl:g}, valid_for={self.valid_for():.3f}{renew}{state})"


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
