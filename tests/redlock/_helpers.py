"""Small helpers shared by the Redlock tests."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from turbolock.redis_server import RedisServer

TTL = 2.0
"""Long enough next to the 50 ms node timeout that a loaded 2-core machine keeps validity."""


def values(raw_masters: list[redis.Redis], key: str | bytes) -> list[bytes | None]:
    """The value of ``key`` on each master (None where absent)."""
    return [connection.get(key) for connection in raw_masters]


def wait_for(predicate: Callable[[], object], limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def restart_empty(server: RedisServer) -> None:
    """A master killed (SIGKILL) and started again without persistence: its keys are gone."""
    server.kill()
    server.start()
