"""A slot moved between two renewal rounds (as ``redis-cli --cluster reshard`` moves it): its
3000 auto-renewed locks (one hash tag, ttl 3 s) are renewed on the new master. They were all
reported lost, on a healthy idle cluster: the round's redo met a MOVED reply per item, and each
copied the whole 16384-slot map and recounted its masters (0.8 ms an item), past the round's
deadline (found in review). Now the -1s of the first pass mark the map stale, the redo reads
it once, and the MOVED replies of a pass, if any, update it with one copy."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from _lost_locks import LostLocks
from _raw import NodeRaws
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import finish_slot_move, node_id, other_master, start_slot_move

COUNT = 3000
TTL = 3.0


# One core: the cost was in the flows, not in a core's work.
@pytest.mark.parametrize("core_name", ["c"], indirect=True)
def test_locks_of_a_slot_moved_between_renewals_are_not_lost(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: NodeRaws) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster)
    names = [f"{{hot}}:{i}" for i in range(COUNT)]
    keys = [(key_prefix + name).encode() for name in names]
    slot = key_slot(keys[0])
    assert {key_slot(key) for key in keys} == {slot}
    lost = LostLocks()
    leases = client.acquire_many(names, TTL, auto_renew=True, on_lost=lost).acquired
    assert len(leases) == COUNT
    source = cluster.master_of(slot)
    target = other_master(cluster, source)
    third = next(node for node in cluster.nodes[:3] if node.port not in (source.port, target.port))
    src, dst = raws(source), raws(target)
    # The reshard of that one slot, done in well under a second, before the first renewal (at 2 s).
    dst_id = start_slot_move(src, dst, slot)
    for start in range(0, COUNT, 100):
        src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS",
                            *keys[start:start + 100])
    finish_slot_move(src, dst, target, slot, [], dst_id)
    raws(third).execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    assert node_id(raws(third)) != dst_id
    time.sleep(TTL + 1.0)  # one renewal (due 1 s before expiry) and its retries; the cluster is healthy
    assert lost.names == [], f"{len(lost.names)} of {COUNT} locks of the moved slot reported lost"
    assert all(info.held for info in client.query_many(names)), "an auto-renewed lock expired"
    assert client.release_many(leases) == [True] * COUNT
