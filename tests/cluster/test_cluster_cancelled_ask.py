"""An asyncio bulk acquire cancelled while the write of a key its slot's source sent on by ASK
(the slot half-migrated, the key not on the source: it goes to the importing node) has no
answer, the importing node SIGSTOPped: that write runs once the node resumes, and the lock it
takes is released in the background, as a share's unanswered chunk's are. It stayed held for
its whole ttl (found in review: the ASK item had no orphan tag)."""

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

from ._helpers import asking_get, other_master, start_slot_move

TTL = 30


def test_a_cancelled_bulk_acquire_releases_what_its_ask_write_took(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis]) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    name = "{moving}:x"
    key = (key_prefix + name).encode()
    slot = key_slot(key)
    source = cluster.master_of(slot)
    target = other_master(cluster, source)
    src, dst = raws(source), raws(target)

    async def body() -> None:
        client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                 timeout=5.0)
        try:
            start_slot_move(src, dst, slot)
            warm = await client.acquire_many(["{moving}:warm"], TTL)  # ASK: a connection to the target
            assert len(warm.acquired) == 1 and asking_get(dst, (key_prefix + "{moving}:warm").encode())
            target.pause()
            try:
                # the source answered ASK; the target holds the write
                finished, _ = await cancel_after(client.acquire_many([name], TTL), seconds=0.5)
                assert not finished
            finally:
                target.resume()
            await asyncio.sleep(0.5)  # the write the target held has run by now
            gone = await asyncio.to_thread(eventually, lambda: asking_get(dst, key) is None, 5.0)
            assert gone, "the lock the cancelled call took on the importing node is still held"
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(body(), 60))
