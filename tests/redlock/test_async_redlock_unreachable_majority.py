"""asyncio Redlock with a majority of masters paused (SIGSTOP: connects succeed, handshakes
hang). A client too few of whose masters were connected gave every connection it was opening
its whole connect timeout (5 s), meant for a first call's connects: a Lock's 0.5 s wait took
5 s, and once the paused masters' connections had been dropped (abandoned replies, the
protocol's deadline), every try_acquire, extend and release took 5 s instead of one node
timeout (found by review). Now only a first connection gets that grace, and never past a
blocking acquire's wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator

import pytest

from turbolock import LockError, QuorumError
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # elapsed times against a wait and a node timeout

CALL_TIMEOUT = 1.0  # the masters' own call deadline: abandoned connections are dropped after it
NODE_TIMEOUT = 0.05
WAIT = 0.5
SLACK = 0.25


def _paused(servers: list[RedisServer]) -> None:
    for server in servers:
        server.pause()


def _resumed(servers: list[RedisServer]) -> None:
    for server in servers:
        server.resume()


@contextlib.contextmanager
def _majority_paused(servers: list[RedisServer]) -> Iterator[None]:
    _paused(servers[1:])
    try:
        yield
    finally:
        _resumed(servers[1:])


async def _connections_dropped(failing: Awaitable[object]) -> None:
    """A call the paused majority fails; then, after the masters' call deadline, their connections
    have been dropped (its replies abandoned)."""
    with pytest.raises(QuorumError):
        await failing
    await asyncio.sleep(CALL_TIMEOUT + 0.5)


@pytest.mark.parametrize("connected", ["never", "once, then dropped"])
def test_a_locks_wait_ends_by_its_timeout(own_masters: Callable[[int], list[RedisServer]], core_name: str,
                                          key_prefix: str, connected: str) -> None:
    servers = own_masters(3)

    async def scenario() -> float:
        client = AsyncRedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                                    timeout=CALL_TIMEOUT)
        try:
            if connected != "never":
                lease = await client.try_acquire("warm-up", 2)
                assert lease is not None and await client.release(lease)
            with _majority_paused(servers):
                if connected != "never":
                    await _connections_dropped(client.try_acquire("x", 2))
                started = time.monotonic()
                try:
                    assert await client.lock("job", 5, timeout=WAIT).acquire() is False
                except LockError:
                    pass
                return time.monotonic() - started
        finally:
            await client.close()

    took = asyncio.run(scenario())
    assert took < WAIT + SLACK, f"a wait of {WAIT}s took {took:.2f}s"


@pytest.mark.parametrize("call", ["try_acquire", "extend", "release"])
def test_calls_cost_one_node_timeout_after_the_connections_dropped(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str, call: str) -> None:
    servers = own_masters(3)

    async def scenario() -> float:
        client = AsyncRedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                                    timeout=CALL_TIMEOUT, node_timeout=NODE_TIMEOUT)
        try:
            lease = await client.try_acquire("held", 30)
            assert lease is not None
            with _majority_paused(servers):
                await _connections_dropped(client.extend(lease, 30))
                started = time.monotonic()
                with pytest.raises(QuorumError):
                    if call == "try_acquire":
                        await client.try_acquire("other", 30)
                    elif call == "extend":
                        await client.extend(lease, 30)
                    else:
                        await client.release(lease)
                return time.monotonic() - started
        finally:
            await client.close()

    took = asyncio.run(scenario())
    assert took < NODE_TIMEOUT + SLACK, f"{call} took {took:.2f}s, the node timeout is {NODE_TIMEOUT}s"


@pytest.mark.parametrize("how", ["try_acquire", "acquire(blocking=False)",
                                 "lock(...).acquire(blocking=False)"])
def test_a_new_clients_single_try_still_waits_for_its_first_connections(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str, how: str) -> None:
    """The other side: masters slow to connect (paused 0.2 s: connects accepted, handshakes
    wait) and a 50 ms node timeout. A new client's single try waits for its first connections
    (a wait of 0 must not cut that grace, as it did once, found by review)."""
    servers = own_masters(3)
    slow = 0.2

    async def scenario() -> object:
        client = AsyncRedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                                    timeout=2.0, node_timeout=NODE_TIMEOUT)
        try:
            _paused(servers)
            asyncio.get_running_loop().call_later(slow, _resumed, servers)
            if how == "try_acquire":
                return await client.try_acquire("first", 10)
            if how == "acquire(blocking=False)":
                return (await client.acquire("first", 10, blocking=False)).lease
            return await client.lock("first", 10).acquire(blocking=False)
        finally:
            await asyncio.sleep(slow)
            _resumed(servers)
            await client.close()

    got = asyncio.run(scenario())
    assert got not in (None, False), got
