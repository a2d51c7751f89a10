"""asyncio Redis Cluster: a master freezes (SIGSTOP: the kernel still accepts connections for it,
nothing answers, as a hung host) and its replica takes over. The client had the map but no
connection to that master: each call opens one, whose handshake outlives the call's deadline
(``UnsentTimeoutError``). That must still count against the node, or the map is never read
again and every call goes to the frozen master for as long as it stays frozen (found in review
of a change that took ``UnsentTimeoutError`` for a deadline spent elsewhere)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from turbolock.asyncio import AsyncClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import names_on, replica_of

pytestmark = pytest.mark.timing

CALLS = 6
TIMEOUT = 1.0


def _promoted(cluster: RedisCluster, replica: RedisServer) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if cluster.cli(replica, "role").split()[:1] == ["master"]:
            return
        time.sleep(0.1)
    raise AssertionError("the replica did not take over")


def test_calls_find_the_new_master_after_a_frozen_master_fails_over(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str) -> None:
    cluster = own_cluster(masters=3, replicas=1, node_timeout=1000)
    frozen = cluster.nodes[1]
    replica = replica_of(cluster, frozen)
    other = names_on(cluster, key_prefix, frozen.port, 1, "other", elsewhere=True)[0]
    name = names_on(cluster, key_prefix, frozen.port, 1, "moved")[0]
    outcomes: list[str] = []

    async def body() -> bool:
        client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                 timeout=TIMEOUT)
        try:
            assert (await client.query(other)).held is False  # the map, no connection to ``frozen``
            frozen.pause()
            await asyncio.to_thread(_promoted, cluster, replica)
            for _ in range(CALLS):
                started = time.monotonic()
                try:
                    lease = await client.try_acquire(name, 30)
                except Exception as exc:
                    outcomes.append(f"{type(exc).__name__} after {time.monotonic() - started:.2f}s")
                    continue
                if lease is not None:
                    return True
                outcomes.append("not acquired")
            return False
        finally:
            await client.close()

    try:
        found = asyncio.run(asyncio.wait_for(body(), 60))
    finally:
        frozen.resume()
    assert found, f"{CALLS} calls never reached the new master: {outcomes}"
