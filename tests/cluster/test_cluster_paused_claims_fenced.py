"""Claims and fenced acquires (single and bulk) on Redis Cluster with one master
SIGSTOPped (a connection to it open): every lock sent there is maybe held
(AcquireOutcomeUnknownError) and released in the background; nothing is left held."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from _eventually import eventually
from turbolock import AcquireOutcomeUnknownError
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, names_on

T = 0.3
TTL = 30


@pytest.mark.parametrize("op", ["claim", "fenced_many", "fenced_one"])
@pytest.mark.parametrize("front", FRONTS)
def test_claims_and_fenced_acquires_on_a_stopped_master(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str, op: str) -> None:
    cluster = quiet_cluster  # a paused master stays the master; each test keeps to its own prefix
    fronts = cluster_fronts(front, cluster.urls[2], core_name, key_prefix, timeout=T, connect_timeout=T)
    try:
        client = fronts.make()
        stopped = cluster.nodes[0]
        on_stopped = names_on(cluster, key_prefix, stopped.port, 20, "s")
        elsewhere = names_on(cluster, key_prefix, stopped.port, 40, "h", elsewhere=True)
        assert client.query_many(on_stopped + elsewhere)  # connections to every master
        assert client.acquire_many(["w"], 1, fenced=True) is not None  # script loaded somewhere
        names = elsewhere + on_stopped
        stopped.pause()
        try:
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                if op == "claim":
                    for _ in range(3):  # the claim starts at a random master: make it reach the stopped one
                        result = client.acquire_many(names, TTL, limit=len(names))
                        client.release_many(result.acquired)
                elif op == "fenced_many":
                    client.acquire_many(names, TTL, fenced=True)
                else:
                    client.try_acquire(on_stopped[0], TTL, fenced=True)
        finally:
            stopped.resume()
        error = caught.value
        if op == "fenced_many":  # the answered leases are the caller's, in error.acquired
            assert sorted(lease.name for lease in error.acquired) == sorted(elsewhere)
            assert client.release_many(error.acquired) == [True] * len(elsewhere)
        prefix = key_prefix.encode()

        def left() -> list[str]:
            return [n for n in names
                    if raws(cluster.master_of(key_slot(prefix + n.encode()))).exists(prefix + n.encode())]

        assert eventually(lambda: not left(), 5.0), f"left held: {left()} after {error!r}"
        assert set(error.names or []) <= set(on_stopped) | set(elsewhere)
    finally:
        fronts.close()
