"""Untested before review: RENEW_MANY_ARGV (Redis Cluster's renewal script) without its token
comparison. No cluster test ever gave a renewed lock's key to another token (they only delete
it), so a renewal that extends whatever value is there passed them all."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from _lost_locks import LostLocks
from _raw import NodeRaws
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster


def test_renewal_does_not_extend_a_key_now_held_by_another_token(
        cluster: RedisCluster, make_cluster_client: Callable[..., ClusterLockClient], key_prefix: str,
        raws: NodeRaws) -> None:
    client = make_cluster_client(cluster)
    lost = LostLocks()
    names = [f"taken:{i}" for i in range(6)]
    leases = client.acquire_many(names, 0.6, auto_renew=True, on_lost=lost).acquired
    assert len(leases) == 6
    victim = leases[0]
    key = key_prefix.encode() + victim.key
    raw: redis.Redis = raws(cluster.master_of(key_slot(key)))
    # Another holder's lock now (as after an expiry and a successor's acquire), for 700 ms.
    assert raw.set(key, b"someone-else-token", px=700)
    time.sleep(1.2)  # two renewal rounds at least (every third of the 0.6 s ttl)
    assert lost.names == [victim.name], "the renewal did not report the lock held by another token lost"
    # The other holder's key expired by its own ttl: never extended by the old holder's renewal.
    assert raw.get(key) is None, f"the old holder's renewal extended another token's lock: {raw.pttl(key)} ms"
    kept = leases[1:]
    assert all(client.check(lease) is not None for lease in kept)
    assert client.release_many(kept) == [True] * len(kept)
