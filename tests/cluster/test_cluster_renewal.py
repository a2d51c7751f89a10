"""Auto-renewal on Redis Cluster: locks on every master kept past their ttl, a lock gone from its
master reported lost, renewal across a slot migrated under it (its keys answered from two nodes
while it moves), and a killed master whose locks are renewed by its promoted replica or reported
lost, while the other masters' locks are never disturbed."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from _lost_locks import LostLocks
from _raw import NodeRaws
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.lease import Lease
from turbolock.redis_cluster import RedisCluster

from ._helpers import asking_get, node_id, other_master, replicated


def _master_port(cluster: RedisCluster, key_prefix: str, lease: Lease) -> int:
    return cluster.master_of(key_slot(key_prefix.encode() + lease.key)).port


def test_auto_renewal_keeps_locks_on_every_master_past_their_ttl(
        cluster: RedisCluster, cluster_client: ClusterLockClient, key_prefix: str) -> None:
    names = [f"job:{i}" for i in range(300)]
    leases = cluster_client.acquire_many(names, 0.6, auto_renew=True).acquired
    plain = cluster_client.acquire_many([f"plain:{i}" for i in range(30)], 0.6).acquired  # the control
    assert len(leases) == 300 and len(plain) == 30
    assert {_master_port(cluster, key_prefix, lease) for lease in leases} == {
        node.port for node in cluster.nodes[:cluster.masters]}, "the locks must span every master"
    assert cluster_client.renewing == 300
    time.sleep(2.0)  # over 3 ttls
    assert all(info.held for info in cluster_client.query_many(names)), "an auto-renewed lock expired"
    assert not any(info.held for info in cluster_client.query_many([lease.name for lease in plain])), \
        "the control was not renewed and must have expired"
    assert all(lease.renewal is not None and lease.renewal.renewals >= 2 for lease in leases)
    assert all(cluster_client.check(lease) is not None for lease in leases[::30])
    assert cluster_client.release_many(leases) == [True] * 300
    assert cluster_client.renewing == 0


def test_a_lock_deleted_on_its_master_is_reported_lost(
        cluster: RedisCluster, make_cluster_client: Callable[..., ClusterLockClient], key_prefix: str,
        raws: NodeRaws) -> None:
    client = make_cluster_client(cluster)
    lost = LostLocks()
    names = [f"shard:{i}" for i in range(30)]
    leases = client.acquire_many(names, 1.0, auto_renew=True, on_lost=lost).acquired
    assert len(leases) == 30
    victims = leases[::6]
    for lease in victims:
        master = cluster.master_of(key_slot(key_prefix.encode() + lease.key))
        assert raws(master).delete(key_prefix.encode() + lease.key) == 1
    deadline = time.monotonic() + 3.0
    while len(lost.names) < len(victims) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(lost.names) == sorted(lease.name for lease in victims)
    time.sleep(1.2)  # past the ttl again: the others are still renewed, nothing more is lost
    assert sorted(lost.names) == sorted(lease.name for lease in victims)
    kept = [lease for lease in leases if lease not in victims]
    assert all(client.check(lease) is not None for lease in kept)
    assert client.release_many(kept) == [True] * len(kept)


def test_renewal_follows_a_slot_migrated_under_it(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: NodeRaws) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster)
    lost = LostLocks()
    tag = "{renewing}"
    slot = key_slot(tag.encode())
    moving = client.acquire_many([f"{tag}:{i}" for i in range(10)], 1.0, auto_renew=True,
                                 on_lost=lost).acquired
    staying = client.acquire_many([f"other:{i}" for i in range(20)], 1.0, auto_renew=True,
                                  on_lost=lost).acquired
    assert len(moving) == 10 and len(staying) == 20
    source = cluster.master_of(slot)
    target = other_master(cluster, source)
    src, dst = raws(source), raws(target)
    prefix = key_prefix.encode()
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(src))
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(dst))
    src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS",
                        *[prefix + lease.key for lease in moving[:5]])
    # Half-way, for over 2 ttls: the source's batch fails on the moved keys ("non local key"),
    # and they are renewed one by one after ASK on the target.
    time.sleep(2.5)
    assert lost.names == []
    assert [asking_get(dst, prefix + lease.key) for lease in moving[:5]] == [
        lease.token for lease in moving[:5]]
    assert [src.get(prefix + lease.key) for lease in moving[5:]] == [lease.token for lease in moving[5:]]
    src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS",
                        *[prefix + lease.key for lease in moving[5:]])
    for node in (src, dst):
        node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", node_id(dst))
    time.sleep(2.5)  # after: MOVED corrects the map, and renewal goes on at the target
    assert lost.names == []
    assert [dst.get(prefix + lease.key) for lease in moving] == [lease.token for lease in moving]
    assert all(client.check(lease) is not None for lease in staying)
    assert client.release_many(moving + staying) == [True] * 30


# One core: the failover is what is tested (12 s a run); renewal's per-core work runs in the others.
@pytest.mark.parametrize("core_name", ["c"], indirect=True)
def test_a_killed_master_s_locks_are_renewed_by_its_replica_or_reported_lost(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str) -> None:
    # Without full coverage required, the other masters serve while the failover runs; with it
    # (the default), every node answers CLUSTERDOWN from the failure's detection to the
    # promotion, and every lock whose ttl is shorter than that window is lost (seen here: all 60).
    cluster = own_cluster(masters=3, replicas=1, node_timeout=1000,
                          extra_config=["cluster-require-full-coverage no"])
    client = make_cluster_client(cluster, timeout=0.5, connect_timeout=0.5)
    lost = LostLocks()
    leases = client.acquire_many([f"acct:{i}" for i in range(60)], 3.0, auto_renew=True,
                                 on_lost=lost).acquired
    assert len(leases) == 60
    victim = cluster.nodes[0]
    raw = redis.Redis(host=victim.host, port=victim.port)
    try:
        assert replicated(cluster, victim, raw) == 1  # its replica has the locks before the crash
    finally:
        raw.close()
    on_victim = [lease for lease in leases if _master_port(cluster, key_prefix, lease) == victim.port]
    elsewhere = [lease for lease in leases if lease not in on_victim]
    assert on_victim and elsewhere
    victim.kill()
    time.sleep(8.0)  # the failover (2-4 s) and over 2 ttls after it
    assert not any(lease.name in lost.names for lease in elsewhere), "a healthy master's lock was lost"
    assert all(client.check(lease) is not None for lease in elsewhere)
    unaccounted = [lease.name for lease in on_victim
                   if lease.name not in lost.names and client.check(lease) is None]
    assert unaccounted == [], "a lock vanished without being reported lost"
    assert client.release_many(elsewhere) == [True] * len(elsewhere)
