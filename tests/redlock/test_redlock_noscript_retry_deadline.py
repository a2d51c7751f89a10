"""A Redlock release or extend reaching a master that forgot the scripts (a restart, SCRIPT
FLUSH) and answers slowly stays within ``node_timeout``: the SCRIPT LOAD and retry after its
NOSCRIPT reply belong to the same attempt. The retry had a whole node timeout of its own, and
the call took 1.7x ``node_timeout`` on both front ends (found in review). The other two masters
answer: the call succeeds all the same.

The retry is sent as soon as the NOSCRIPT reply is in, not after every master's wait: with one
master stopped and the two others having forgotten the scripts, their retries are answered
while the stopped one is waited for, and the call succeeds (a first attempt at the deadline
retried only after that wait, and failed with no quorum)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

from _netfaults import FaultProxy, paused
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer
from turbolock.redlock import RedlockClient

pytestmark = pytest.mark.timing

NODE_TIMEOUT = 1.0
DELAY = 0.42  # each way, through the proxy: 0.84 s a round trip
SLACK = 0.5


@pytest.fixture
def masters() -> Iterator[tuple[list[str], redis.Redis, FaultProxy]]:
    servers = [RedisServer().start() for _ in range(3)]
    proxy = FaultProxy(servers[0].host, servers[0].port).start()
    raw = redis.Redis(host=servers[0].host, port=servers[0].port)
    try:
        yield [proxy.url, servers[1].url, servers[2].url], raw, proxy
    finally:
        raw.close()
        proxy.stop()
        for server in servers:
            server.stop()


async def _async_call(urls: list[str], raw: redis.Redis, proxy: FaultProxy, core_name: str, key_prefix: str,
                      call: str) -> tuple[float, object]:
    client = AsyncRedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)
    try:
        lease = await client.try_acquire("a", 30)
        assert lease is not None
        raw.script_flush()
        proxy.delay(DELAY)
        started = time.monotonic()
        outcome = await (client.release(lease) if call == "release" else client.extend(lease, 30))
        return time.monotonic() - started, outcome
    finally:
        proxy.heal()
        await client.close()


def _call(urls: list[str], raw: redis.Redis, proxy: FaultProxy, core_name: str, key_prefix: str,
          call: str) -> tuple[float, object]:
    client = RedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)
    try:
        lease = client.try_acquire("a", 30)
        assert lease is not None
        raw.script_flush()
        proxy.delay(DELAY)
        started = time.monotonic()
        outcome = client.release(lease) if call == "release" else client.extend(lease, 30)
        return time.monotonic() - started, outcome
    finally:
        proxy.heal()
        client.close()


@pytest.mark.parametrize("front", ["threads", "asyncio"])
@pytest.mark.parametrize("call", ["release", "extend"])
def test_the_retry_after_noscript_is_within_the_node_timeout(
        masters: tuple[list[str], redis.Redis, FaultProxy], core_name: str, key_prefix: str, call: str,
        front: str) -> None:
    urls, raw, proxy = masters
    if front == "asyncio":
        elapsed, outcome = asyncio.run(_async_call(urls, raw, proxy, core_name, key_prefix, call))
    else:
        elapsed, outcome = _call(urls, raw, proxy, core_name, key_prefix, call)
    assert outcome is True  # a majority answered
    assert elapsed < NODE_TIMEOUT + SLACK, f"{call} took {elapsed:.2f}s with node_timeout {NODE_TIMEOUT}s"


STOPPED_NODE_TIMEOUT = 0.3


def _stopped_and_forgotten(urls: list[str], raws: list[redis.Redis], stopped: RedisServer, core_name: str,
                           key_prefix: str, call: str) -> tuple[float, object]:
    client = RedlockClient(urls, node_timeout=STOPPED_NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)
    try:
        lease = client.try_acquire("a", 30)
        assert lease is not None
        for raw in raws:
            raw.script_flush()
        with paused(stopped):
            started = time.monotonic()
            outcome = client.release(lease) if call == "release" else client.extend(lease, 30)
            return time.monotonic() - started, outcome
    finally:
        client.close()


async def _async_stopped_and_forgotten(urls: list[str], raws: list[redis.Redis], stopped: RedisServer,
                                       core_name: str, key_prefix: str, call: str) -> tuple[float, object]:
    client = AsyncRedlockClient(urls, node_timeout=STOPPED_NODE_TIMEOUT, core=core_name,
                                key_prefix=key_prefix)
    try:
        lease = await client.try_acquire("a", 30)
        assert lease is not None
        for raw in raws:
            raw.script_flush()
        with paused(stopped):
            started = time.monotonic()
            outcome = await (client.release(lease) if call == "release" else client.extend(lease, 30))
            return time.monotonic() - started, outcome
    finally:
        await client.close()


@pytest.mark.parametrize("front", ["threads", "asyncio"])
@pytest.mark.parametrize("call", ["release", "extend"])
def test_a_stopped_master_does_not_starve_the_retries_of_the_others(core_name: str, key_prefix: str,
                                                                    call: str, front: str) -> None:
    servers = [RedisServer().start() for _ in range(3)]
    # Threads read the masters in turn: the stopped one last, so the others' NOSCRIPT replies are
    # read (and their retries sent) before its wait. asyncio waits for all at once: stopped first.
    stopped, others = (servers[2], servers[:2]) if front == "threads" else (servers[0], servers[1:])
    raws = [redis.Redis(host=server.host, port=server.port) for server in others]
    urls = [server.url for server in servers]
    try:
        if front == "asyncio":
            elapsed, outcome = asyncio.run(_async_stopped_and_forgotten(urls, raws, stopped, core_name,
                                                                        key_prefix, call))
        else:
            elapsed, outcome = _stopped_and_forgotten(urls, raws, stopped, core_name, key_prefix, call)
        assert outcome is True  # the two masters that forgot the script reloaded it in time
        assert elapsed < STOPPED_NODE_TIMEOUT + SLACK, f"{call} took {elapsed:.2f}s"
    finally:
        for raw in raws:
            raw.close()
        for server in servers:
            server.stop()
