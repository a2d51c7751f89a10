"""``replicas_ack`` under Sentinel (threads and asyncio): with the replica acknowledging, locks
are granted; with it SIGSTOPped (for less than the Sentinels' down-after time), every acquire is
reported not durable and released, while a client without the option notices nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from _netfaults import paused
from turbolock import NotDurableError
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

REPLICAS_TIMEOUT = 0.1


@pytest.fixture(params=FRONTS)
def make_client(request: pytest.FixtureRequest, sentinel_group: RedisSentinel, core_name: str,
                key_prefix: str) -> Iterator[Callable[..., Any]]:
    urls, service = sentinel_group.sentinel_urls, sentinel_group.service
    fronts = Fronts(request.param, partial(SentinelLockClient, urls, service),
                    partial(AsyncSentinelLockClient, urls, service),
                    core=core_name, key_prefix=key_prefix, timeout=2.0)
    yield fronts.make
    fronts.close()


def test_a_paused_replica_is_reported_and_its_locks_released(
        sentinel_group: RedisSentinel, make_client: Callable[..., Any], key_prefix: str) -> None:
    client = make_client(replicas_ack=1, replicas_timeout=REPLICAS_TIMEOUT)
    control = make_client()
    names = [f"n{i}" for i in range(300)]
    durable = client.acquire_many(names, 10)
    assert durable.all_acquired and durable.not_durable == []
    assert all(client.release_many(durable.acquired))
    master = sentinel_group.node_at(sentinel_group.master_port())
    replica = next(node for node in sentinel_group.servers if node.port != master.port)
    with paused(replica):
        with pytest.raises(NotDurableError):
            client.try_acquire("single", 10)
        result = client.acquire_many(names, 10)
        unnoticed = control.acquire_many(["c1", "c2"], 10)
    assert result.acquired == [] and sorted(result.not_durable) == sorted(names)
    assert unnoticed.all_acquired
    raw = redis.Redis(host=master.host, port=master.port)
    try:
        keys = [(key_prefix + name).encode() for name in ["single", *names]]
        assert eventually(lambda: raw.exists(*keys) == 0, 5.0), "not-durable locks left held"
    finally:
        raw.close()
    assert all(control.release_many(unnoticed.acquired))
