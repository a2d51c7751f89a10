"""Waking on release on a Redis Cluster: each key's waiters subscribe on the master of its slot
(the release publishes on the key's shard), threads and asyncio; one subscriber per master."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _waking import PROMPT, acquire_in_thread, stop_polling
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import names_on, slot_owners

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own


@pytest.fixture(params=FRONTS)
def client(request: pytest.FixtureRequest, cluster: RedisCluster, core_name: str,
           key_prefix: str) -> Iterator[Any]:
    url = cluster.url
    fronts = Fronts(request.param, partial(ClusterLockClient.from_url, url),
                    partial(AsyncClusterLockClient.from_url, url), core=core_name, key_prefix=key_prefix)
    yield fronts.make()
    fronts.close()


def test_waiters_on_every_master_are_woken_at_once(client: Any, cluster: RedisCluster, key_prefix: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    stop_polling(monkeypatch)  # only a wake-up can hand the locks over in time
    ports = sorted(set(slot_owners(cluster)))  # the masters now (a failover may have moved them)
    names = [names_on(cluster, key_prefix, port, 1, f"wake{m}")[0] for m, port in enumerate(ports)]
    held = [client.try_acquire(name, 30) for name in names]
    assert all(held)
    waiting = [acquire_in_thread(client.lock(name, 30), 10) for name in names]
    time.sleep(0.3)
    for name, port in zip(names, ports, strict=True):
        with redis.Redis(port=port) as raw:  # subscribed on the key's own master
            assert raw.execute_command("PUBSUB", "SHARDNUMSUB", key_prefix + name)[1] == 1
    released = time.monotonic()
    for lease in held:
        assert client.release(lease)
    for thread, done in waiting:
        thread.join(10)
        assert done and done[0] - released < PROMPT * 2, done
