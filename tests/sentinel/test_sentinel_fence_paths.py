"""A Sentinel client's every fenced path (threads and asyncio) draws from the prefix's one counter
on the master: fences grow and never repeat across single, bulk, claim, Lock and fair Lock."""

from __future__ import annotations

import pytest
import redis

from turbolock._wire.scripts import fence_counter
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_fronts


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_sentinel_fences_across_paths(sentinel_group: RedisSentinel, core_name: str, key_prefix: str,
                                      front: str) -> None:
    fronts = sentinel_fronts(front, sentinel_group, core_name, key_prefix)
    try:
        client = fronts.make()
        seen: list[int] = []
        for _ in range(2):
            lease = client.try_acquire("acct", 10, fenced=True)
            seen.append(lease.fence)
            assert client.release(lease)
            bulk = client.acquire_many(["x", "acct"] + [f"z{i}" for i in range(1500)], 10, fenced=True)
            assert bulk.all_acquired
            seen.append(bulk.leases[1].fence)
            assert all(client.release_many(bulk.acquired))
            claim = client.acquire_many(["acct"], 10, limit=1, fenced=True)
            seen.append(claim.acquired[0].fence)
            assert all(client.release_many(claim.acquired))
            lock = client.lock("acct", 10, fenced=True)
            assert lock.acquire()
            seen.append(lock.fence)
            lock.release()
            fair = client.lock("acct", 10, fenced=True, fair=True)
            assert fair.acquire()
            seen.append(fair.fence)
            fair.release()
        assert seen == sorted(seen) and len(set(seen)) == len(seen), seen
        master = sentinel_group.node_at(sentinel_group.master_port())
        with redis.Redis(host=master.host, port=master.port) as raw:
            assert int(raw.get(fence_counter(key_prefix.encode()))) == seen[-1]
    finally:
        fronts.close()
