"""A Redis Cluster claim's ``acquired`` lists its leases in input order, as one server's claim and
every bulk result do; it listed them master by master, from a random master, so code pairing
``acquired`` with its input broke only on Cluster. Found in review."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the flow is one for both cores


def test_acquired_is_in_input_order(cluster: RedisCluster,
                                    make_cluster_client: Callable[..., ClusterLockClient]) -> None:
    client = make_cluster_client(cluster)
    names = [f"n{i}" for i in range(30)]  # spread over the three masters
    for _ in range(6):  # the first master asked is random
        result = client.acquire_many(names, 30, limit=30)
        try:
            assert [lease.name for lease in result.acquired] == names
        finally:
            assert all(client.release_many(result.acquired))
