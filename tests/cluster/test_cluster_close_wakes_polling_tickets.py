"""A Redis Cluster waiter whose key's master was not known when it joined (no slot map could be
read) gets a ticket that only polls. close() woke the waiters of every master's subscriber but
not these: such a waiter slept out its pause (up to 200 ms) before it found the client closed
(noticed in review). Now ``stop``/``close`` of the cluster's waker wakes them too."""

from __future__ import annotations

import asyncio
import math
import threading
import time

import pytest

from turbolock._aio.cluster_waker import AsyncClusterWaker
from turbolock._sync.cluster_waker import ClusterWaker
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the waker's rule: no core's own

PAUSE = 5.0
"""The poll pause the ticket waits out unless close() wakes it."""


def _paused(cluster: RedisCluster) -> list[RedisServer]:
    nodes = [node for node in cluster.nodes if node.running]
    for node in nodes:
        node.pause()
    return nodes


def test_threaded_close_wakes_a_ticket_that_only_polls(quiet_cluster: RedisCluster, core_name: str,
                                                       key_prefix: str) -> None:
    client = ClusterLockClient.from_url(quiet_cluster.url, core=core_name, key_prefix=key_prefix, timeout=2.0)
    key = client.key_prefix + b"nomap"
    paused = _paused(quiet_cluster)
    try:
        ticket = client._wake_join(key, time.monotonic() + 0.3)  # the map cannot be read
    finally:
        for node in paused:
            node.resume()
    assert isinstance(ticket.home, ClusterWaker) and not ticket.heard
    ended: list[float] = []

    def wait() -> None:
        client._wake_wait(ticket, PAUSE)
        ended.append(time.monotonic())

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    time.sleep(0.2)
    closing = time.monotonic()
    client.close()
    waiter.join(PAUSE + 1)
    late = ended[0] - closing if ended else math.inf
    assert late < 0.5, f"the polling ticket slept {late:.2f}s past close()"
    client._wake_leave(ticket)


def test_async_close_wakes_a_ticket_that_only_polls(quiet_cluster: RedisCluster, core_name: str,
                                                    key_prefix: str) -> None:
    async def body() -> float:
        client = AsyncClusterLockClient.from_url(quiet_cluster.url, core=core_name, key_prefix=key_prefix,
                                                 timeout=2.0)
        key = client.key_prefix + b"nomap"
        paused = _paused(quiet_cluster)
        try:
            ticket = await client._wake_join(key, time.monotonic() + 0.3)
        finally:
            for node in paused:
                node.resume()
        assert isinstance(ticket.home, AsyncClusterWaker) and not ticket.heard
        waiting = asyncio.ensure_future(client._wake_wait(ticket, PAUSE))
        await asyncio.sleep(0.2)
        closing = time.monotonic()
        await client.close()
        await asyncio.wait_for(waiting, PAUSE + 1)
        client._wake_leave(ticket)
        return time.monotonic() - closing

    late = asyncio.run(body())
    assert late < 0.5, f"the polling ticket slept {late:.2f}s past close()"
