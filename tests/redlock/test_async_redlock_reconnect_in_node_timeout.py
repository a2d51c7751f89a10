"""A Redlock attempt costs one ``node_timeout`` (all masters at once), a bulk chunk one
``chunk_timeout_for(ttl)``: README "Deadlines". The threaded fan-out keeps to it when a master's
connection must be opened again (its handshake, write and reply all by the attempt's deadline),
and so does the asyncio one now. It gave a master whose connection opened late in the wait a
whole new timeout from then (``deadline = max(deadline, now + timeout)``), so a master
reconnecting over a slow link (every reply 0.45 s late, ``node_timeout=0.5``) made the call take
about 0.9 s (found in review); only a cold client's first connections get that grace now. The
other two masters are warm and answer at once, so the client is not cold."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from _netfaults import FaultProxy
from turbolock import LockError, RedlockClient
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

NODE_TIMEOUT = 0.5
DELAY = 0.45
TTL = 5.0  # chunk_timeout_for(5 s) = max(0.5, min(1, 0.5)) = 0.5 s
SLACK = 0.2


@pytest.fixture
def setup(own_masters: Callable[[int], list[RedisServer]]
          ) -> Iterator[tuple[list[str], FaultProxy, RedisServer]]:
    servers = own_masters(3)
    with FaultProxy(servers[2].host, servers[2].port) as proxy:
        yield [servers[0].url, servers[1].url, proxy.url], proxy, servers[2]


def _kill_clients(server: RedisServer) -> None:
    raw = redis.Redis(host=server.host, port=server.port)
    try:
        raw.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    finally:
        raw.close()


CALLS = ["try_acquire", "query", "release", "extend", "acquire_many", "release_many"]


async def _call(client: object, call: str, leases: list[object]) -> object:
    if call == "try_acquire":
        return await client.try_acquire("fresh", TTL)  # type: ignore[attr-defined]
    if call == "query":
        return await client.query("fresh")  # type: ignore[attr-defined]
    if call == "release":
        return await client.release(leases[0])  # type: ignore[attr-defined]
    if call == "extend":
        return await client.extend(leases[0], TTL)  # type: ignore[attr-defined]
    if call == "acquire_many":
        return await client.acquire_many(["m1", "m2"], TTL)  # type: ignore[attr-defined]
    return await client.release_many(leases)  # type: ignore[attr-defined]


@pytest.mark.parametrize("call", CALLS)
def test_asyncio_reconnect_counts_in_the_attempts_node_timeout(
        setup: tuple[list[str], FaultProxy, RedisServer], core_name: str, key_prefix: str, call: str) -> None:
    urls, proxy, behind = setup
    budget = NODE_TIMEOUT

    async def scenario() -> tuple[float, object]:
        client = AsyncRedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix)
        try:
            leases = [await client.try_acquire("l1", TTL), await client.try_acquire("l2", TTL)]
            assert all(lease is not None for lease in leases)
            await client.release(await client.try_acquire("warm", TTL))  # scripts loaded
            _kill_clients(behind)  # the third master's connection goes; the other two stay warm
            await asyncio.sleep(0.2)
            proxy.delay(DELAY, to_server=False, to_client=True)
            started = time.monotonic()
            try:
                outcome: object = await _call(client, call, leases)
            except LockError as exc:
                outcome = exc
            took = time.monotonic() - started
            proxy.heal()
            return took, outcome
        finally:
            await client.close()

    took, outcome = asyncio.run(scenario())
    assert took <= budget + SLACK, f"{call} took {took:.2f}s, budget {budget}s ({outcome!r})"


@pytest.mark.parametrize("call", ["try_acquire", "acquire_many"])
def test_threads_control(setup: tuple[list[str], FaultProxy, RedisServer], core_name: str, key_prefix: str,
                         call: str) -> None:
    urls, proxy, behind = setup
    with RedlockClient(urls, node_timeout=NODE_TIMEOUT, core=core_name, key_prefix=key_prefix) as client:
        assert client.try_acquire("warm", TTL) is not None
        _kill_clients(behind)
        time.sleep(0.2)
        proxy.delay(DELAY, to_server=False, to_client=True)
        started = time.monotonic()
        if call == "try_acquire":
            client.try_acquire("fresh", TTL)
        else:
            client.acquire_many(["m1", "m2"], TTL)
        took = time.monotonic() - started
        proxy.heal()
    assert took <= NODE_TIMEOUT + SLACK, f"{call} took {took:.2f}s, budget {NODE_TIMEOUT}s"
