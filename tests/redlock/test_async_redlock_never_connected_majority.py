"""asyncio Redlock whose majority of masters has never answered (SIGSTOPped before the client's
first call: connects accepted, handshakes hang). A new client's first try may wait for its first
connections (``_aio/fanout._wait``'s grace, tests/redlock/test_async_redlock_unreachable_majority
.py), once: the later calls cost one node timeout each (README "Deadlines": a Redlock call,
``node_timeout`` per attempt), as the threaded client's (the control). The grace was given again
on every call, since those masters' pools had never connected: each try_acquire, release,
extend... cost a whole connect timeout for as long as the masters stayed down (found in review)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from turbolock import LockError, RedlockClient
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

CALL_TIMEOUT = 1.5  # the masters' call (and connect) timeout
NODE_TIMEOUT = 0.05
SLACK = 0.25


def test_asyncio_later_calls_cost_one_node_timeout(own_masters: Callable[[int], list[RedisServer]],
                                                    core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)
    for server in servers[1:]:
        server.pause()
    try:
        async def scenario() -> list[float]:
            client = AsyncRedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                                        timeout=CALL_TIMEOUT, node_timeout=NODE_TIMEOUT)
            took: list[float] = []
            try:
                for i in range(4):  # the first call may wait for its first connections
                    started = time.monotonic()
                    try:
                        await client.try_acquire(f"x{i}", 10)
                    except LockError:
                        pass
                    took.append(time.monotonic() - started)
            finally:
                await client.close()
            return took

        took = asyncio.run(scenario())
    finally:
        for server in servers[1:]:
            server.resume()
    later = took[1:]
    assert max(later) < NODE_TIMEOUT + SLACK, f"calls after the first took {[f'{t:.2f}' for t in took]}s"


def test_threads_control(own_masters: Callable[[int], list[RedisServer]], core_name: str,
                         key_prefix: str) -> None:
    servers = own_masters(3)
    for server in servers[1:]:
        server.pause()
    try:
        took: list[float] = []
        with RedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                           timeout=CALL_TIMEOUT, node_timeout=NODE_TIMEOUT) as client:
            for i in range(4):
                started = time.monotonic()
                try:
                    client.try_acquire(f"x{i}", 10)
                except LockError:
                    pass
                took.append(time.monotonic() - started)
    finally:
        for server in servers[1:]:
            server.resume()
    assert max(took[1:]) < NODE_TIMEOUT + SLACK, f"calls took {[f'{t:.2f}' for t in took]}s"
