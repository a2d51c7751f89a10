"""What a successful acquire hands back: the lock name, its hidden token and its local expiry."""

from __future__ import annotations

import math
import time
from typing import NamedTuple


class Lease:
    """Proof of holding one lock, valid on the client that made it.

    ``acquired_at`` is the monotonic time the acquiring (or last extending) command was
    *sent*, so ``valid_for()`` never overestimates: the server started the ttl later than
    that. The token is never shown in a repr.
    """

    __slots__ = ("name", "key", "token", "ttl_ms", "acquired_at", "owner")

    def __init__(self, name: str | bytes, key: bytes, token: bytes, ttl_ms: int, acquired_at: float,
                 owner: object) -> None:
        self.name = name
        self.key = key
        self.token = token
        self.ttl_ms = ttl_ms
        self.acquired_at = acquired_at
        self.owner = owner

    @property
    def ttl(self) -> float:
        """The ttl of the last acquire or extend, in seconds."""
        return self.ttl_ms / 1000.0

    @property
    def expires_at(self) -> float:
        """Monotonic time by which the server has certainly expired the lock unless extended."""
        return self.acquired_at + self.ttl_ms / 1000.0

    def valid_for(self) -> float:
        """Seconds left before the lock may expire, by the local clock (0 when already past)."""
        return max(0.0, self.expires_at - time.monotonic())

    def __repr__(self) -> str:
        return f"Lease(name={self.name!r}, ttl={self.ttl:g}, valid_for={self.valid_for():.3f})"


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
