"""A renewal round on Redis Cluster redoes a master's moved keys as soon as that master has
answered, not after the slowest master: with one master stalled (SIGSTOP) across the renewal,
the auto-renewed locks of a slot moved off a healthy master were reported lost too. The round
waited for the stalled master until shortly before their expiry, left their redo no time, and
each retry waited for it again (found in review). The stalled master's own locks are lost, as
they must be: nothing renewed them."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from _blocking_async import FRONTS
from _lost_locks import LostLocks
from _raw import NodeRaws
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster

from ._helpers import cluster_fronts, move_slot, names_on, other_master

MOVED = 200
STALLED = 20
TTL = 3.0


# One core: what is tested is the order of the flow's steps, not a core's work.
@pytest.mark.parametrize("core_name", ["c"], indirect=True)
@pytest.mark.parametrize("front", FRONTS)
def test_a_moved_slot_is_renewed_while_another_master_stalls(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, raws: NodeRaws,
        front: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=5.0)
    try:
        client = fronts.make()
        moving = [f"{{hot}}:{i}" for i in range(MOVED)]
        keys = [(key_prefix + name).encode() for name in moving]
        slot = key_slot(keys[0])
        source = cluster.master_of(slot)
        target = other_master(cluster, source)
        third = next(node for node in cluster.nodes[:3] if node.port not in (source.port, target.port))
        stalling = names_on(cluster, key_prefix, third.port, STALLED, "far")
        lost = LostLocks()
        leases = client.acquire_many(moving + stalling, TTL, auto_renew=True, on_lost=lost).acquired
        assert len(leases) == MOVED + STALLED
        move_slot(cluster, raws, source, target, slot, keys)  # before the first renewal (at 2 s)
        third.pause()  # across the renewal, until the locks' first ttl is well over
        try:
            time.sleep(TTL + 0.5)
        finally:
            third.resume()
        moved_lost = sorted(set(lost.names) & set(moving))
        assert moved_lost == [], f"{len(moved_lost)} of {MOVED} locks of the moved slot reported lost"
        assert set(stalling) <= set(lost.names), "a lock of the stalled master was not reported lost"
        assert all(info.held for info in client.query_many(moving)), "an auto-renewed lock expired"
    finally:
        fronts.close()
