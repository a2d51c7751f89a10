"""A Redlock attempt that fails while a master does not answer costs one node timeout, and a
blocking acquire that keeps failing ends by its wait (found by the fault suite, issue #16).

Another client holds the lock on all three masters; then one master is SIGSTOPped. Every
attempt is conflicted on the two that answer and gets no reply from the stopped one. Before the
fix, the attempt then waited for a release on the stopped master (a second node timeout), and a
blocking acquire started a new attempt (two node timeouts, then) even when its wait was nearly
over: ``acquire(timeout=W)`` ended up to two node timeouts late. Now the release owed to a
master that did not answer is sent in the background, and no retry starts that could end past
the wait (its last part passes without one).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from _netfaults import paused
from turbolock import RedlockClient, RedlockStatus
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

from .conftest import Runner

NODE_TIMEOUT = 0.2
"""Long next to scheduling noise, so one node timeout and two are told apart."""
TTL = 10
WAIT = 0.5
SLACK = 0.05


@pytest.fixture
def masters(redis_server: RedisServer, own_server: RedisServer) -> Iterator[list[RedisServer]]:
    with RedisServer() as second:
        yield [redis_server, second, own_server]


def _urls(masters: list[RedisServer]) -> list[str]:
    return [server.url for server in masters]


def _held_elsewhere(masters: list[RedisServer], core_name: str, key_prefix: str) -> RedlockClient:
    holder = RedlockClient(_urls(masters), node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)
    lease = holder.try_acquire("held", TTL)
    assert lease is not None and lease.instances.acquired == 3
    return holder


def test_a_failed_try_costs_one_node_timeout(masters: list[RedisServer], core_name: str,
                                             key_prefix: str) -> None:
    holder = _held_elsewhere(masters, core_name, key_prefix)
    with RedlockClient(_urls(masters), node_timeout=NODE_TIMEOUT, core=core_name,
                       key_prefix=key_prefix) as client:
        assert client.query("held").held  # connections open before the fault
        with paused(masters[2]):
            started = time.monotonic()
            assert client.try_acquire("held", TTL) is None
            elapsed = time.monotonic() - started
    holder.close()
    assert elapsed < NODE_TIMEOUT + SLACK, f"a failed attempt took {elapsed:.3f}s: more than one node timeout"


def test_a_blocking_acquire_ends_by_its_wait(masters: list[RedisServer], core_name: str,
                                             key_prefix: str) -> None:
    holder = _held_elsewhere(masters, core_name, key_prefix)
    with RedlockClient(_urls(masters), node_timeout=NODE_TIMEOUT, retry_delay=0.05, core=core_name,
                       key_prefix=key_prefix) as client:
        assert client.query("held").held
        with paused(masters[2]):
            started = time.monotonic()
            result = client.acquire("held", TTL, timeout=WAIT)
            elapsed = time.monotonic() - started
    holder.close()
    assert result.status is RedlockStatus.CONFLICTED and result.attempts >= 2
    assert WAIT - 0.05 <= elapsed < WAIT + SLACK, f"acquire(timeout={WAIT}) took {elapsed:.3f}s"


def test_async_a_blocking_acquire_ends_by_its_wait(arun_asyncio: Runner, masters: list[RedisServer],
                                                   core_name: str, key_prefix: str) -> None:
    holder = _held_elsewhere(masters, core_name, key_prefix)

    async def body() -> tuple[float, float, RedlockStatus]:
        async with AsyncRedlockClient(_urls(masters), node_timeout=NODE_TIMEOUT, retry_delay=0.05,
                                      core=core_name, key_prefix=key_prefix) as client:
            assert (await client.query("held")).held
            with paused(masters[2]):
                started = time.monotonic()
                assert await client.try_acquire("held", TTL) is None
                tried = time.monotonic() - started
                started = time.monotonic()
                result = await client.acquire("held", TTL, timeout=WAIT)
                waited = time.monotonic() - started
        return tried, waited, result.status

    tried, waited, status = arun_asyncio(body)
    holder.close()
    assert tried < NODE_TIMEOUT + SLACK, f"a failed attempt took {tried:.3f}s: more than one node timeout"
    assert status is RedlockStatus.CONFLICTED
    assert WAIT - 0.05 <= waited < WAIT + SLACK, f"acquire(timeout={WAIT}) took {waited:.3f}s"
