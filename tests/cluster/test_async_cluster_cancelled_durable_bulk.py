"""An asyncio durable bulk acquire (``replicas_ack``) on Redis Cluster cancelled while its WAIT is
pending (the master's replica stopped; every SET answered): every lock it took must be released
in the background. A master's share runs without seeing its chunks as they come; their replies
sat in the executor's own list and were dropped, the locks held for their ttl (found in review).
The Sentinel and one-server twins: tests/sentinel/test_async_sentinel_cancelled_bulk_answered.py."""

from __future__ import annotations

from _cancelling import cancelled_bulk_leaves_nothing
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import names_on, replica_of


def test_cancelled_in_wait_releases_every_lock(cluster: RedisCluster, core_name: str,
                                               key_prefix: str) -> None:
    options = {"core": core_name, "key_prefix": key_prefix, "timeout": 5.0, "chunk_size": 3,
               "replicas_ack": 1, "replicas_timeout": 2.0}
    master = cluster.nodes[0]
    replica = replica_of(cluster, master)
    names = names_on(cluster, key_prefix, master.port, 10, "d")
    make = lambda: AsyncClusterLockClient.from_url(cluster.url, **options)  # noqa: E731
    left = cancelled_bulk_leaves_nothing(make, names, master, key_prefix, replica.pause, replica.resume)
    assert left == 0, f"{left} of {len(names)} locks left held after the cancelled call"
