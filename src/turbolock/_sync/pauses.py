"""The pauses of a threaded client's blocking acquires between attempts (polling, a Redlock
retry's random delay), which its close() ends at once: a waiter stops waiting as the client
closes, not one pause later."""

from __future__ import annotations

import threading


class Pauses:
    """Pauses that ``end_all()`` (close) ends, and every later one at once."""

    __slots__ = ("_ended",)

    def __init__(self) -> None:
        self._ended = threading.Event()

    def pause(self, seconds: float) -> None:
        self._ended.wait(seconds)

    def end_all(self) -> None:
        self._ended.set()
