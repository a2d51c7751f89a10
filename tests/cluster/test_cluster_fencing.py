"""Fenced acquires on Redis Cluster (threads and asyncio): each name's counter lives on the
master of the lock's slot (next to the lock), fences grow per name on every master, a new
counter starting at the server's clock in microseconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer


def test_fences_grow_per_name_and_live_beside_their_lock(
        cluster: RedisCluster, make_client: Callable[..., Any], key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis]) -> None:
    client = make_client()
    names = [f"acct:{i}" for i in range(30)] + ["{shard:1}:a", "{shard:1}:b"]
    now_us = int(time.time() * 1e6)
    first = [client.try_acquire(name, 10, fenced=True) for name in names]
    assert all(lease is not None and abs(lease.fence - now_us) < 5_000_000 for lease in first)
    assert all(client.release(lease) for lease in first)
    second = [client.try_acquire(name, 10, fenced=True) for name in names]
    assert [lease.fence for lease in second] == [lease.fence + 1 for lease in first]  # one counter per name
    for name, lease in zip(names, second, strict=True):
        key = (key_prefix + name).encode()
        counter = key + b":fence" if name.startswith("{") else b"{" + key + b"}:fence"
        assert key_slot(counter) == key_slot(key)
        owner = raws(cluster.master_of(key_slot(key)))
        assert owner.get(counter) == b"%d" % lease.fence and owner.exists(key) == 1
    assert all(client.release(lease) for lease in second)


def test_bulk_fenced_acquires_across_masters(cluster: RedisCluster, make_client: Callable[..., Any]) -> None:
    client = make_client()
    names = [f"bulk:{i}" for i in range(600)]
    first = client.acquire_many(names, 10, fenced=True)
    assert first.all_acquired and all(isinstance(lease.fence, int) for lease in first.acquired)
    assert all(client.release_many(first.acquired))
    second = client.acquire_many(names, 10, fenced=True)
    assert [lease.name for lease in second.acquired] == names
    assert [lease.fence for lease in second.acquired] == [lease.fence + 1 for lease in first.acquired]
    assert all(client.release_many(second.acquired))


def test_fenced_claims_across_masters(cluster: RedisCluster, make_client: Callable[..., Any]) -> None:
    client = make_client()
    shards = [f"claim:{i}" for i in range(60)]
    held = client.acquire_many(shards[:30], 10)
    first = client.acquire_many(shards, 10, limit=12, fenced=True)
    assert len(first.acquired) == 12 and all(isinstance(lease.fence, int) for lease in first.acquired)
    assert not {lease.name for lease in first.acquired} & set(shards[:30])
    assert all(client.release_many(first.acquired)) and all(client.release_many(held.acquired))
    again = client.acquire_many([lease.name for lease in first.acquired], 10, limit=12, fenced=True)
    before = {lease.name: lease.fence for lease in first.acquired}
    assert {lease.name: lease.fence - 1 for lease in again.acquired} == before
    assert all(client.release_many(again.acquired))
