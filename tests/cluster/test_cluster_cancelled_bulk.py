"""An asyncio bulk acquire on Redis Cluster cancelled while one master (SIGSTOPped) has
not answered, after the other masters' shares did: every lock the call took or may have taken
must be released in the background (a cancelled task holds nothing). The shares that had
answered were once dropped by ``asyncio.gather`` and left held."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import redis

from _cancelling import cancel_after
from _eventually import eventually
from turbolock._wire.slots import key_slot
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import names_on

TTL = 30


def test_a_cancelled_bulk_acquire_releases_the_answered_shares(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis]) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    stopped = cluster.nodes[0]
    on_stopped = names_on(cluster, key_prefix, stopped.port, 20, "s")
    elsewhere = names_on(cluster, key_prefix, stopped.port, 40, "h", elsewhere=True)
    prefix = key_prefix.encode()

    async def body() -> None:
        client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                 timeout=5.0)
        try:
            assert (await client.query_many(on_stopped + elsewhere))  # a connection to every master
            stopped.pause()
            try:
                # the other masters answer; the stopped one does not
                call = client.acquire_many(elsewhere + on_stopped, TTL)
                finished, _ = await cancel_after(call, seconds=0.5)
                assert not finished
            finally:
                stopped.resume()

            def left() -> list[str]:
                keys = {name: prefix + name.encode() for name in elsewhere + on_stopped}
                return [name for name, key in keys.items()
                        if raws(cluster.master_of(key_slot(key))).exists(key)]

            ok = await asyncio.to_thread(eventually, lambda: not left(), 5.0)
            still = left()
            assert ok, (f"{len(still)} locks left held after the cancel "
                        f"({sum(n in elsewhere for n in still)} on the masters that answered, "
                        f"{sum(n in on_stopped for n in still)} on the stopped one)")
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(body(), 60))

