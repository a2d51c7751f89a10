"""Redis Cluster: a lease released while the renewal round that renewed it is being settled
stays released (see tests/test_renewal_release_while_settling.py). Found in review."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from _release_race import assert_stays_released, release_while_settling
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.timing


def test_a_released_lease_stays_released_when_a_round_renewed_it(
        cluster: RedisCluster, make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str) -> None:
    client = make_cluster_client(cluster)
    raw = redis.RedisCluster(host=cluster.nodes[0].host, port=cluster.nodes[0].port)
    try:
        victim = release_while_settling(client, lambda name: raw.set(key_prefix + name, b"thief", px=10_000),
                                        same_batch=False)
        assert raw.exists(key_prefix + "victim") == 0
    finally:
        raw.close()
    assert_stays_released(victim)
