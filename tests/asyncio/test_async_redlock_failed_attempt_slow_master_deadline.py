"""A failed AsyncRedlockClient attempt that a slow (but answering) master granted: its release on
that master was awaited on the caller's time with a node timeout of its own, so one attempt cost
two node timeouts, and a blocking acquire ended up to a node timeout past its wait (found in
review). The release now waits what is left of the attempt's time; a master that does not
answer by then is released in the background. (The flow is shared with the threaded client.)

README "Deadlines": a Redlock call's budget is ``node_timeout`` per attempt; "Redlock": retries
stop so that none "could end past" the wait."""

from __future__ import annotations

import asyncio
import time

import pytest

from _netfaults import FaultProxy
from turbolock import RedlockStatus
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

NODE_TIMEOUT = 0.3
DELAY = 0.28  # master 0 answers within one node timeout, every time
TTL = 10
SLACK = 0.08

pytestmark = pytest.mark.timing


@pytest.fixture
def slow_first(three: list[RedisServer], raws, key_prefix: str):
    conns = raws(three)
    for conn in conns[1:]:  # another holder on masters 1 and 2: every attempt fails, granted on master 0
        conn.set(key_prefix + "held", b"o" * 16, px=TTL * 1000)
    with FaultProxy(three[0].host, three[0].port) as proxy:
        yield proxy, [proxy.url, three[1].url, three[2].url], conns
    for conn in conns:
        conn.delete(key_prefix + "held")


def test_failed_try_acquire_costs_one_node_timeout(slow_first, core_name: str, key_prefix: str) -> None:
    proxy, urls, conns = slow_first

    async def body() -> float:
        async with AsyncRedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name,
                                      key_prefix=key_prefix) as client:
            assert (await client.query("held")).held
            proxy.delay(DELAY, to_server=False)
            started = time.monotonic()
            assert await client.try_acquire("held", TTL) is None
            elapsed = time.monotonic() - started
            proxy.heal()
            return elapsed

    elapsed = asyncio.run(body())
    assert conns[0].get(key_prefix + "held") is None
    assert elapsed < NODE_TIMEOUT + SLACK, f"a failed attempt took {elapsed:.3f}s"


def test_blocking_acquire_ends_by_its_wait(slow_first, core_name: str, key_prefix: str) -> None:
    proxy, urls, _ = slow_first
    wait = 0.9  # the first attempt takes 2 x 0.28 s, leaving 0.34 s: a second one starts, and takes 0.56 s

    async def body() -> tuple[float, object]:
        async with AsyncRedlockClient(urls, node_timeout=NODE_TIMEOUT, retry_delay=0.001, core=core_name,
                                      key_prefix=key_prefix) as client:
            assert (await client.query("held")).held
            proxy.delay(DELAY, to_server=False)
            started = time.monotonic()
            result = await client.acquire("held", TTL, timeout=wait)
            elapsed = time.monotonic() - started
            proxy.heal()
            return elapsed, result

    elapsed, result = asyncio.run(body())
    assert result.status is RedlockStatus.CONFLICTED
    assert elapsed < wait + SLACK, f"acquire(timeout={wait}) took {elapsed:.3f}s ({result.attempts} attempts)"


def test_acquire_many_with_a_failed_name_costs_one_chunk_timeout(slow_first, core_name: str,
                                                                 key_prefix: str) -> None:
    proxy, urls, conns = slow_first

    async def body() -> tuple[float, float, object]:
        async with AsyncRedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name,
                                      key_prefix=key_prefix) as client:
            assert (await client.query("held")).held
            budget = client.chunk_timeout_for(3000)  # 0.3 s: node_timeout
            proxy.delay(DELAY, to_server=False)
            started = time.monotonic()
            result = await client.acquire_many(["held"], 3)
            elapsed = time.monotonic() - started
            proxy.heal()
            return elapsed, budget, result

    elapsed, budget, result = asyncio.run(body())
    assert result.acquired == [] and conns[0].get(key_prefix + "held") is None
    assert elapsed < budget + SLACK, f"acquire_many of one chunk took {elapsed:.3f}s, chunk timeout {budget}s"
