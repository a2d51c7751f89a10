"""A Sentinel client's every fenced path (threads and asyncio) draws from the prefix's one counter
on the master: fences grow and never repeat across single, bulk, claim, Lock and fair Lock."""

from __future__ import annotations

import pytest
import redis

from _fence_paths import fences_by_every_path
from turbolock._wire.scripts import fence_counter
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_fronts


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_sentinel_fences_across_paths(sentinel_group: RedisSentinel, core_name: str, key_prefix: str,
                                      front: str) -> None:
    fronts = sentinel_fronts(front, sentinel_group, core_name, key_prefix)
    try:
        seen = fences_by_every_path(fronts.make(), "acct", bulk_with=[f"z{i}" for i in range(1500)])
        assert seen == sorted(seen) and len(set(seen)) == len(seen), seen  # two transactions' worth
        master = sentinel_group.node_at(sentinel_group.master_port())
        with redis.Redis(host=master.host, port=master.port) as raw:
            assert int(raw.get(fence_counter(key_prefix.encode()))) == seen[-1]
    finally:
        fronts.close()
