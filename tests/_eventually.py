"""Waiting in tests for what happens in the background (clean-ups, releases, renewals)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import redis


def eventually(predicate: Callable[[], object], seconds: float) -> bool:
    """Whether ``predicate()`` turns true within ``seconds`` (polled every 10 ms)."""
    end = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


async def eventually_async(predicate: Callable[[], object], seconds: float) -> bool:
    """``eventually`` for a test inside an event loop: the loop's own tasks (an asyncio
    client's cleanup) run while it polls."""
    end = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > end:
            return False
        await asyncio.sleep(0.01)
    return True


def gone_within(raw: redis.Redis, key: bytes, seconds: float) -> bool:
    """Whether ``key`` disappears from the server within ``seconds``."""
    return eventually(lambda: not raw.exists(key), seconds)
