"""A durable acquire (``replicas_ack``) whose ``SET`` the master holds back (``CLIENT PAUSE ...
WRITE``) while its replica is stopped: how long the call took, on either front, to check it
against its timeout (tests/test_durable_acquire_late_set_deadline.py and its Cluster twin)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from turbolock import LockError
from turbolock.redis_server import RedisServer

T = 1.0
REPLICAS_TIMEOUT = 0.6
HELD_FOR = 0.8
"""How long the master holds the acquire's SET before running it."""
SLACK = 0.25
DURABLE = {"timeout": T, "connect_timeout": T, "replicas_ack": 1, "replicas_timeout": REPLICAS_TIMEOUT}


@contextmanager
def held_writes(master: RedisServer, replica: Any) -> Iterator[Callable[[], None]]:
    """``stall()``: the master holds writes for ``HELD_FOR`` and the replica stops; undone at the end."""
    raw = redis.Redis(host=master.host, port=master.port)

    def stall() -> None:
        raw.execute_command("CLIENT", "PAUSE", int(HELD_FOR * 1000), "WRITE")
        replica.pause()

    try:
        yield stall
    finally:
        replica.resume()
        raw.execute_command("CLIENT", "UNPAUSE")
        raw.close()


def time_acquire(front: str, make: Callable[[], Any], warm: str, stall: Callable[[], None],
                 acquire: Callable[[Any], Any]) -> tuple[float, object]:
    """``acquire(client)`` on a client of ``front`` ("threads" or "asyncio") that ``make()``s,
    warmed up by a query of ``warm``, timed from ``stall()``: (seconds, result or LockError)."""
    if front == "threads":
        client = make()
        try:
            assert client.query(warm).held is False  # a connection (and a Cluster's map) in place
            stall()
            started = time.monotonic()
            try:
                outcome: object = acquire(client)
            except LockError as exc:
                outcome = exc
            return time.monotonic() - started, outcome
        finally:
            client.close()

    async def scenario() -> tuple[float, object]:
        client = make()
        try:
            assert (await client.query(warm)).held is False
            stall()
            started = time.monotonic()
            try:
                got: object = await acquire(client)
            except LockError as exc:
                got = exc
            return time.monotonic() - started, got
        finally:
            await client.close()

    return asyncio.run(scenario())
