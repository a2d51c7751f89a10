"""On Redis Cluster every fenced path draws a name's fence from that name's own counter in its
slot (single, bulk, claim, Lock object, fair Lock), never from a prefix-wide one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from turbolock._wire.scripts import fence_counter
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer


def test_every_fenced_path_uses_the_names_own_counter(
        cluster: RedisCluster, make_client: Callable[..., Any], key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis]) -> None:
    client = make_client()
    name = "acct"
    seen: list[int] = []
    for _ in range(2):
        lease = client.try_acquire(name, 10, fenced=True)
        seen.append(lease.fence)
        assert client.release(lease)
        bulk = client.acquire_many(["x1", name, "y1"], 10, fenced=True)
        seen.append(bulk.leases[1].fence)
        assert all(client.release_many(bulk.acquired))
        claim = client.acquire_many([name], 10, limit=1, fenced=True)
        seen.append(claim.acquired[0].fence)
        assert all(client.release_many(claim.acquired))
        lock = client.lock(name, 10, fenced=True)
        assert lock.acquire()
        seen.append(lock.fence)
        lock.release()
        fair = client.lock(name, 10, fenced=True, fair=True)
        assert fair.acquire()
        seen.append(fair.fence)
        fair.release()
    # One counter for the name alone: each grant its next value.
    assert seen == list(range(seen[0], seen[0] + len(seen))), seen
    key = (key_prefix + name).encode()
    counter = b"{" + key + b"}:fence"
    owner = raws(cluster.master_of(key_slot(key)))
    assert owner.get(counter) == b"%d" % seen[-1]
    shared = fence_counter(key_prefix.encode())
    assert raws(cluster.master_of(key_slot(shared))).exists(shared) == 0
