"""``replicas_ack`` on Redis Cluster: each master's share of a bulk acquire, and each single
acquire, is followed by ``WAIT`` on that master; when one master's replica is SIGSTOPped, only
the locks of that master are reported not durable (and released), the others are granted. A
client without the option, under the same pause, notices nothing (the negative control)."""

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
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import names_on, replica_of, replicated

REPLICAS_TIMEOUT = 0.1


@pytest.fixture(params=FRONTS)
def make_client(request: pytest.FixtureRequest, cluster: RedisCluster, core_name: str,
                key_prefix: str) -> Iterator[Callable[..., Any]]:
    """``make_client(**options)``: a ClusterLockClient, or its asyncio twin driven by ``Blocking``."""
    fronts = Fronts(request.param, partial(ClusterLockClient.from_url, cluster.url),
                    partial(AsyncClusterLockClient.from_url, cluster.url),
                    core=core_name, key_prefix=key_prefix, timeout=2.0)
    yield fronts.make
    fronts.close()


def test_only_the_paused_replicas_master_reports_not_durable(
        cluster: RedisCluster, make_client: Callable[..., Any], key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis]) -> None:
    client = make_client(replicas_ack=1, replicas_timeout=REPLICAS_TIMEOUT)
    control = make_client()
    master = cluster.nodes[0]
    raw = raws(master)
    assert replicated(cluster, master, raw) == 1  # its replica acknowledges writes before the pause
    on_master = names_on(cluster, key_prefix, master.port, 200, "p")
    elsewhere = names_on(cluster, key_prefix, master.port, 600, "o", elsewhere=True)
    durable = client.acquire_many(on_master, 10)
    assert durable.all_acquired and durable.not_durable == []
    assert all(client.release_many(durable.acquired))

    with paused(replica_of(cluster, master)):
        result = client.acquire_many(on_master + elsewhere, 10)
        with pytest.raises(NotDurableError):
            client.try_acquire(names_on(cluster, key_prefix, master.port, 1, "single")[0], 10)
        unnoticed = control.acquire_many(names_on(cluster, key_prefix, master.port, 50, "c"), 10)
    got = {lease.name for lease in result.acquired}
    missing = sorted(set(elsewhere) - got)
    assert sorted(result.not_durable) == sorted(on_master)
    assert set(got) <= set(elsewhere) and missing == [], f"{len(missing)} locks on healthy masters missing"
    assert unnoticed.all_acquired and unnoticed.not_durable == []
    keys = [(key_prefix + name).encode() for name in on_master]
    assert eventually(lambda: _held(raw, keys) == 0, 5.0), "not-durable locks left held"
    assert all(client.release_many(result.acquired)) and all(control.release_many(unnoticed.acquired))


def _held(raw: redis.Redis, keys: list[bytes]) -> int:
    pipe = raw.pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    return sum(pipe.execute())
