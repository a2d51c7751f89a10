"""Helpers of the waking tests (one server, Sentinel): timing a hand-over to a blocked waiter."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from turbolock._flows import lock_rules

PROMPT = 0.03
"""A woken waiter has the lock within this long of the release (it takes one round trip to
hear and one to acquire; the polling it replaces pauses 50-200 ms between attempts)."""


def stop_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiters that hear releases do not poll during the test: only a wake-up can hand over."""
    monkeypatch.setattr(lock_rules, "WOKEN_POLL_FIRST", 30.0)
    monkeypatch.setattr(lock_rules, "WOKEN_POLL_MAX", 30.0)


def acquire_in_thread(lock: Any, timeout: float) -> tuple[threading.Thread, list[float]]:
    """Start ``lock.acquire(timeout=...)`` in a thread; the list gets the time it returned True."""
    done: list[float] = []

    def take() -> None:
        if lock.acquire(timeout=timeout):
            done.append(time.monotonic())

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread, done


def handover_delays(client: Any, rounds: int, name: str = "wake") -> list[float]:
    """Per round: a waiter blocks on a held lock, the holder releases; how long after the
    release the waiter had it."""
    delays = []
    for _ in range(rounds):
        held = client.try_acquire(name, 30)
        assert held is not None
        waiter = client.lock(name, 30)
        thread, done = acquire_in_thread(waiter, 10)
        time.sleep(0.3)  # the waiter found the lock held and waits (pauses up to 200 ms)
        released = time.monotonic()
        assert client.release(held)
        thread.join(10)
        assert done, "the waiter never acquired"
        delays.append(done[0] - released)
        waiter.release()
    return delays
