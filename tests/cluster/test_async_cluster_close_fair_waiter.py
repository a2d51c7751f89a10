"""close() of an AsyncClusterLockClient while a fair waiter's attempt hangs on a stopped master:
close closes the cluster's subscribers (``AsyncClusterWaker.close``), then waits for its fair
waiters; the waiter, its attempt failed meanwhile, joins the waker again, and ``AsyncClusterWaker``
(which has no closed state) makes a brand-new ``AsyncWaker`` for that master. Its connect task
outlives close, and once the master answers its subscriber connection stays open for good: a
closed client keeps a connection (and asyncio a transport nobody closes: "unclosed transport"
ResourceWarning) to the master (found in review). A closed cluster waker now makes no waker,
and a join raises ClientClosedError, as one server's waker does."""

from __future__ import annotations

import asyncio
import time

import redis

from turbolock._wire.slots import key_slot
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.redis_cluster import RedisCluster

T = 1.0


def test_close_with_a_fair_waiter_on_a_stopped_master_leaves_no_subscriber(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str) -> None:
    cluster = quiet_cluster
    master = cluster.master_of(key_slot((key_prefix + "b").encode()))
    raw = redis.Redis(host=master.host, port=master.port)
    try:
        before = {c["id"] for c in raw.client_list()}

        async def main() -> object:
            other = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix)
            assert await other.try_acquire("b", 30) is not None
            await other.close()
            client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                     timeout=T, connect_timeout=T)
            assert (await client.query("b")).held
            master.pause()
            try:
                waiter = asyncio.ensure_future(client.lock("b", 30, fair=True).acquire(timeout=5))
                await asyncio.sleep(0.3)
                await client.close()
                await asyncio.wait([waiter], timeout=5)
                assert waiter.done()
            finally:
                master.resume()
            await asyncio.sleep(1.0)  # the master answers again: whatever was connecting is connected
            return waiter.exception() or waiter.result()

        outcome = asyncio.run(main())
        time.sleep(0.2)
        left = [c for c in raw.client_list() if c["id"] not in before and c.get("cmd") != "client|list"]
        shown = [(c["cmd"], c["flags"]) for c in left]
        assert not left, (f"after close() (the waiter ended with {outcome!r}) the closed client still has "
                          f"{len(left)} connection(s) to the master: {shown}")
    finally:
        master.resume()
        raw.close()

