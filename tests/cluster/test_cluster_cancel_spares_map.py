"""An asyncio Redis Cluster call the caller cancels (``wait_for``, a task's cancel) says nothing
about its master: the slot map must not be read again because of it. The client took any
failure of a call to a master, a cancel included, for a sign of a failover: a cancel-heavy
service read the map (``CLUSTER SHARDS``) again after every cancelled call. A master that really
fails a call (a timeout) still has the map read again: the control."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis

from _cancelling import cancel_after
from turbolock import TimeoutError
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import names_on

STOPPED_FOR = 0.4
"""Seconds a master is stopped (SIGSTOP): well inside the cluster's node timeout."""


def _map_reads(cluster: RedisCluster, raws: Callable[[RedisServer], redis.Redis]) -> int:
    total = 0
    for node in cluster.nodes:
        stats = raws(node).info("commandstats")
        total += sum(int(stats.get(f"cmdstat_cluster|{sub}", {}).get("calls", 0))
                     for sub in ("shards", "slots"))
    return total


@pytest.mark.parametrize("ending", ["cancelled", "timed out"])
def test_a_cancelled_call_does_not_make_the_client_read_the_map_again(
        cluster: RedisCluster, core_name: str, key_prefix: str, raws: Callable[[RedisServer], redis.Redis],
        ending: str) -> None:
    stopped = cluster.nodes[0]
    name = names_on(cluster, key_prefix, stopped.port, 1, "cancel")[0]
    other = names_on(cluster, key_prefix, stopped.port, 1, "after", elsewhere=True)[0]

    async def body() -> int:
        timeout = 5.0 if ending == "cancelled" else STOPPED_FOR / 2
        client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                 timeout=timeout)
        try:
            assert (await client.query(name)).held is False  # the map and a connection in place
            assert (await client.query(other)).held is False
            before = _map_reads(cluster, raws)
            stopped.pause()
            try:
                if ending == "cancelled":
                    finished, _ = await cancel_after(client.try_acquire(name, 30), seconds=STOPPED_FOR / 2)
                    assert not finished
                else:
                    with pytest.raises(TimeoutError):
                        await client.query(name)
            finally:
                stopped.resume()
            assert (await client.query(other)).held is False  # the next call, on another master
            await asyncio.sleep(0.05)
            return _map_reads(cluster, raws) - before
        finally:
            await client.close()

    reads = asyncio.run(body())
    if ending == "cancelled":
        assert reads == 0, f"{reads} map reads after a cancelled call"
    else:
        assert reads >= 1, "a master that timed out did not make the client read the map again"
