"""Auto-renewal on Redis Cluster with one master SIGSTOPped past the leases' loss point, then
resumed just before their real expiry: the renewal written before the stop runs on resume, and
a lease reported lost must not stay held by our token (it is released in the background)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from _lost_locks import LostLocks
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, names_on

pytestmark = pytest.mark.timing  # 1 s ttls renewed on time: scripts/test runs these on their own

TTL = 1.0
T = 0.15


@pytest.mark.parametrize("front", FRONTS)
def test_lost_lease_not_left_held_by_a_late_renewal(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    fronts = cluster_fronts(front, cluster.urls[2], core_name, key_prefix, timeout=T, connect_timeout=T)
    try:
        client = fronts.make()
        stopped = cluster.nodes[0]
        on_stopped = names_on(cluster, key_prefix, stopped.port, 5, "s")
        elsewhere = names_on(cluster, key_prefix, stopped.port, 5, "e", elsewhere=True)
        lost = LostLocks()
        leases = client.acquire_many(on_stopped + elsewhere, TTL, auto_renew=True, on_lost=lost).acquired
        assert len(leases) == 10
        time.sleep(0.8)  # one renewal done: the renewer has its connections
        stopped.pause()
        try:
            deadline = time.monotonic() + 2 * TTL
            while len(lost.names) < len(on_stopped) and time.monotonic() < deadline:
                time.sleep(0.005)
        finally:
            stopped.resume()
        assert sorted(lost.names) == sorted(on_stopped)
        time.sleep(0.3)
        raw = raws(stopped)
        mine = {lease.name: lease for lease in leases}
        still = [(name, raw.pttl(key_prefix + name)) for name in on_stopped
                 if raw.get(key_prefix + name) == mine[name].token]
        assert still == [], f"reported lost, yet held by our token 0.3s after resume (name, pttl ms): {still}"
    finally:
        fronts.close()
