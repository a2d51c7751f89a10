"""``FencedStore.write_many`` (and the asyncio twin's) on a resource that is a Redis Cluster
(``redis.RedisCluster``): every item written or refused by its fence, keys on every master. It
failed before sending anything: redis-py's cluster pipeline refuses scripts ("Calling pipelined
function evalsha is blocked when running redis in cluster mode"; found in review), while single
reads and writes worked."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from turbolock import FencedWriteError
from turbolock.asyncio import AsyncFencedStore
from turbolock.fencing import FencedStore
from turbolock.redis_cluster import RedisCluster

KEYS = 12  # spread over the three masters' slots


def _items(prefix: str, fence: int) -> list[tuple[str, str, int]]:
    return [(f"{prefix}account:{i}", f"v{fence}", fence) for i in range(KEYS)]


def test_write_many_on_a_cluster_resource(cluster: RedisCluster, key_prefix: str) -> None:
    resource = redis.RedisCluster.from_url(cluster.url)
    try:
        store = FencedStore(resource)
        assert store.write_many(_items(key_prefix, 5)) == [True] * KEYS
        stale = _items(key_prefix, 4)
        fresh = _items(key_prefix, 6)
        assert store.write_many([stale[0], fresh[1], *stale[2:]]) == [False, True] + [False] * (KEYS - 2)
        assert [store.read(key, 6) for key, _, _ in stale] == [b"v5", b"v6"] + [b"v5"] * (KEYS - 2)
        # A refusal (a key of another type) is that item's, as through a pipeline: the others go on.
        resource.set(f"{key_prefix}plain", "x")
        with pytest.raises(FencedWriteError) as refused:
            store.write_many([(f"{key_prefix}plain", "v", 7), *_items(key_prefix, 7)])
        assert refused.value.names == [f"{key_prefix}plain"]
        assert refused.value.written == [False] + [True] * KEYS
    finally:
        resource.close()


def test_async_write_many_on_a_cluster_resource(cluster: RedisCluster, key_prefix: str) -> None:
    async def main() -> None:
        resource = redis.asyncio.RedisCluster.from_url(cluster.url)
        try:
            store = AsyncFencedStore(resource)
            assert await store.write_many(_items(key_prefix, 5)) == [True] * KEYS
            stale = _items(key_prefix, 4)
            fresh = _items(key_prefix, 6)
            written = await store.write_many([stale[0], fresh[1], *stale[2:]])
            assert written == [False, True] + [False] * (KEYS - 2)
            values = [await store.read(key, 6) for key, _, _ in stale]
            assert values == [b"v5", b"v6"] + [b"v5"] * (KEYS - 2)
        finally:
            await resource.aclose()

    asyncio.run(main())
