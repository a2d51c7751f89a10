"""Where turbolock reports what it does, when someone listens: ``sink`` is None until
``turbolock.telemetry.instrument()`` sets it, and every report site checks it first, so a
program that never instruments pays one attribute read per call."""

from __future__ import annotations

import time
from typing import Protocol


class Sink(Protocol):
    def acquired(self, granted: int, contended: int, seconds: float | None, operation: str,
                 name: str | bytes | None = None) -> None:
        """An acquire call's locks granted and found held by others, and its duration."""

    def released(self, released: int, refused: int, seconds: float | None, operation: str) -> None:
        """A release call's locks deleted and refused (no longer ours), and its duration."""

    def extended(self, extended: int, refused: int, seconds: float | None, operation: str) -> None:
        """An extend call's locks extended and refused, and its duration."""

    def waited(self, seconds: float, acquired: bool, name: str | bytes | None = None) -> None:
        """A blocking acquire's wait, until the lock or the end of its patience."""

    def lost(self, name: str | bytes | None = None) -> None:
        """A held lock found lost (its lost signal fired)."""

    def renewal_lag(self, seconds: float) -> None:
        """How late a renewal round began past the due time of its most overdue lock."""


sink: Sink | None = None


def since(started: float) -> float | None:
    """Seconds since ``started``, a call's start taken only when a sink listened (0.0 when none
    did: telemetry switched on during the call has no duration for it, not the clock's age)."""
    return time.monotonic() - started if started else None
