"""When a quiet subscriber connection is asked whether it is still there, and when no answer
means it is not (sans-IO; both wakers use it). A subscriber only ever reads: without this, a
connection whose peer vanished (a host gone, a path black-holed) would look idle for hours,
and its waiters would only poll."""

from __future__ import annotations

PING_AFTER = 15.0
"""Seconds without a byte from the server after which the subscriber sends PING."""


class Keepalive:
    __slots__ = ("timeout", "heard_at", "ping_at")

    def __init__(self, timeout: float, now: float) -> None:
        self.timeout = timeout
        """How long a PING may go unanswered (the client's call deadline)."""
        self.heard_at = now
        self.ping_at: float | None = None

    def heard(self, now: float) -> None:
        """Bytes came in: the connection is alive."""
        self.heard_at = now
        self.ping_at = None

    def ping_due(self, now: float) -> bool:
        """Whether to send a PING now (then it counts as sent)."""
        if self.ping_at is None and now - self.heard_at >= PING_AFTER:
            self.ping_at = now
            return True
        return False

    def dead(self, now: float) -> bool:
        """Whether a PING went unanswered past the deadline."""
        return self.ping_at is not None and now - self.ping_at > self.timeout
