"""AsyncSentinelLockClient: the calls on the master the Sentinels name, a graceful failover
followed with every auto-renewed lock kept, and a killed master failing calls in time until the
promoted replica serves them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis

from turbolock import ConnectionError, InvalidArgumentError, Lease
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel


def _run(body: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(body(), 60)
    return asyncio.run(bounded())


def _client(group: RedisSentinel, core_name: str, key_prefix: str, **options: Any) -> AsyncSentinelLockClient:
    return AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                                   **options)


def _get(group: RedisSentinel, port: int, key: str) -> bytes | None:
    node = group.node_at(port)
    raw = redis.Redis(host=node.host, port=node.port)
    try:
        value = raw.get(key)
        return value if value is None else bytes(value)
    finally:
        raw.close()


def test_every_call_goes_to_the_master_the_sentinels_name(sentinel_group: RedisSentinel, core_name: str,
                                                          key_prefix: str) -> None:
    async def body() -> None:
        async with _client(sentinel_group, core_name, key_prefix) as client:
            lease = await client.try_acquire("order:1", 10)
            assert lease is not None
            assert _get(sentinel_group, sentinel_group.master_port(), key_prefix + "order:1") == lease.token
            assert await client.try_acquire("order:1", 10) is None
            assert await client.extend(lease, 20) and await client.release(lease)
            names = [f"seat:{i}" for i in range(100)]
            result = await client.acquire_many(names, 10)
            assert len(result.acquired) == 100
            assert sum(info.held for info in await client.query_many(names)) == 100
            assert await client.release_many(result.acquired) == [True] * 100
            async with client.lock("nightly"):  # no ttl: 30 s renewed
                assert client.renewing == 1
            assert client.renewing == 0
            assert "turbolock" in repr(client)

    _run(body)
    with pytest.raises(InvalidArgumentError) as info:
        AsyncSentinelLockClient([], "turbolock")
    assert info.value.argument == "sentinels"


def test_a_graceful_failover_is_followed_and_keeps_every_lock(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str) -> None:
    group = own_sentinel_group(replicas=1, sentinels=3)
    lost: list[str | bytes] = []

    def on_lost(lease: Lease) -> None:
        lost.append(lease.name)

    async def body() -> None:
        async with _client(group, core_name, key_prefix, timeout=1.0) as client:
            renewed = (await client.acquire_many([f"job:{i}" for i in range(30)], 4.0, auto_renew=True,
                                                 on_lost=on_lost)).acquired
            assert len(renewed) == 30
            old_port = group.master_port()
            assert "OK" in await asyncio.to_thread(group.cli, group.sentinels[0], "sentinel", "failover",
                                                   group.service)
            new_master = await asyncio.to_thread(group.wait_failover, old_port)
            # The old master still takes writes for about 10 s: the client leaves it when its
            # check of the Sentinels (every second) names the new one.
            await asyncio.sleep(2.5)
            deadline = time.monotonic() + 5
            while True:
                try:
                    after = await client.try_acquire("after", 10)
                    break
                except ConnectionError:  # READONLY from the demoted master: its connection is dropped
                    assert time.monotonic() < deadline, "the client did not follow the failover"
                    await asyncio.sleep(0.1)
            assert after is not None
            assert _get(group, new_master.port, key_prefix + "after") == after.token
            await asyncio.sleep(4.5)  # over a ttl of the renewed locks since the failover
            assert lost == []
            assert all([await client.check(lease) is not None for lease in renewed])
            assert await client.release_many([*renewed, after]) == [True] * 31

    _run(body)


def test_a_killed_master_fails_calls_in_time_then_the_promoted_replica_serves(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str) -> None:
    group = own_sentinel_group(replicas=1, sentinels=3, down_after=1000)
    timeout = 0.5

    async def body() -> None:
        async with _client(group, core_name, key_prefix, timeout=timeout, connect_timeout=timeout) as client:
            leases = (await client.acquire_many([f"acct:{i}" for i in range(20)], 60)).acquired
            assert len(leases) == 20
            old_port = group.master_port()
            master = group.node_at(old_port)
            raw = redis.Redis(host=master.host, port=master.port)
            try:
                raw.set("sync", 1, px=1000)
                assert int(raw.execute_command("WAIT", 1, 2000)) == 1
            finally:
                raw.close()
            await asyncio.to_thread(master.kill)
            failures = 0
            started = time.monotonic()
            while True:
                assert time.monotonic() - started < 30, "the client never reached the promoted replica"
                call_started = time.monotonic()
                try:
                    left = await client.check(leases[0])
                except ConnectionError:
                    failures += 1
                    elapsed = time.monotonic() - call_started
                    assert elapsed < timeout * 2 + 0.3, f"a call took {elapsed:.2f}s (timeout {timeout}s)"
                    await asyncio.sleep(0.1)
                    continue
                assert left is not None and left > 0, "the promoted replica lost an acknowledged lock"
                break
            assert failures >= 1
            assert all([await client.check(lease) is not None for lease in leases])
            assert await client.release_many(leases) == [True] * 20

    _run(body)
