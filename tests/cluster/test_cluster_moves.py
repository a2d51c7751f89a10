"""Slots that move while locks are held and taken: a slot migrated by hand (``CLUSTER SETSLOT``
IMPORTING/MIGRATING, ``MIGRATE``, ``SETSLOT NODE``: what ``redis-cli --cluster reshard`` does)
answers ASK while it moves and MOVED after; the client follows both and no lock is lost or
granted twice. A killed master's calls fail with typed errors within their deadline, and once
its replica is promoted the client finds it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from _netfaults import served_after_failures
from _raw import NodeRaws
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import (
    asking_get,
    fail_over,
    finish_slot_move,
    names_on,
    other_master,
    replica_of,
    replicated,
    start_slot_move,
)

TTL = 30


def test_a_slot_moving_answers_ask_then_moved_and_nothing_is_lost(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: NodeRaws) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster)
    tag = "{moving}"
    slot = key_slot(tag.encode())
    names = [f"{tag}:{i}" for i in range(6)]  # behind the client's key prefix, the tag decides the slot
    client_prefix = key_prefix.encode()
    assert all(key_slot(client_prefix + name.encode()) == slot for name in names)
    held = [client.try_acquire(name, TTL) for name in names[:3]]  # on the source before the move
    assert all(lease is not None for lease in held)
    source = cluster.master_of(slot)
    target = other_master(cluster, source)
    src, dst = raws(source), raws(target)
    target_id = start_slot_move(src, dst, slot)
    # Half-way: the held keys are still on the source; a new name there is not: ASK sends it on.
    moved_one = client.try_acquire(names[3], TTL)
    assert moved_one is not None
    assert asking_get(dst, client_prefix + names[3].encode()) == moved_one.token
    assert int(src.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)) == 3  # only the held ones
    assert client.try_acquire(names[0], TTL) is None  # still held, on the source
    held_keys = [client_prefix + name.encode() for name in names[:3]]
    finish_slot_move(src, dst, target, slot, held_keys, target_id)
    # After: the client's map still says "source"; MOVED corrects it, for one key and for many.
    assert client.try_acquire(names[1], TTL) is None
    result = client.acquire_many(names, TTL)
    assert sorted(result.not_acquired) == sorted(names[:4])
    assert len(result.acquired) == 2
    assert all(dst.get(client_prefix + lease.key) == lease.token for lease in result.acquired)
    leases = [lease for lease in held if lease is not None] + [moved_one] + result.acquired
    assert client.release_many(leases) == [True] * 6
    assert dst.dbsize() == 0 and src.dbsize() == 0


def test_a_killed_master_fails_calls_in_time_then_its_replica_serves(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str) -> None:
    cluster = own_cluster(masters=3, replicas=1, node_timeout=1000)
    timeout = 0.5
    client = make_cluster_client(cluster, timeout=timeout, connect_timeout=timeout)
    names = [f"acct:{i}" for i in range(30)]
    leases = client.acquire_many(names, TTL).acquired
    assert len(leases) == 30
    raw = redis.Redis(host=cluster.nodes[0].host, port=cluster.nodes[0].port)
    try:
        assert replicated(cluster, cluster.nodes[0], raw) == 1  # its replica has the locks before the crash
    finally:
        raw.close()
    victim = cluster.nodes[0]
    on_victim = [lease for lease in leases
                 if cluster.master_of(key_slot(key_prefix.encode() + lease.key)).port == victim.port]
    assert on_victim
    victim.kill()
    failures, left = served_after_failures(lambda: client.check(on_victim[0]), timeout, limit=20)
    assert left is not None and left > 0, "the promoted replica lost an acknowledged lock"
    assert failures >= 1
    assert all(client.check(lease) is not None for lease in on_victim)
    assert client.release_many(leases) == [True] * 30


@pytest.mark.parametrize("mode", ["coordinated", "takeover"])
def test_a_manual_failover_is_followed_and_keeps_the_locks(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: NodeRaws, mode: str) -> None:
    # CLUSTER FAILOVER on a replica: the client's map is wrong afterwards and MOVED (or a refused
    # write) sets it right. The coordinated form pauses the master's writers until the replica
    # has every write, so even locks taken just before it (no WAIT) survive; TAKEOVER does not
    # wait for the replica: WAIT first there, or the last locks may be lost as in any
    # asynchronous failover (what this test checks is the client following it).
    cluster = own_cluster(masters=3, replicas=1)
    client = make_cluster_client(cluster)
    names = [f"invoice:{i}" for i in range(40)]
    leases = client.acquire_many(names, TTL).acquired
    assert len(leases) == 40
    old_master = cluster.nodes[0]
    replica = replica_of(cluster, old_master)
    if mode == "takeover":
        assert replicated(cluster, old_master, raws(old_master)) == 1
        fail_over(cluster, replica, "takeover")
    else:
        late = names_on(cluster, key_prefix, old_master.port, 20, "late")
        late_leases = client.acquire_many(late, TTL).acquired
        assert len(late_leases) == 20
        fail_over(cluster, replica)
        names, leases = names + late, leases + late_leases
    cluster.wait_ok()
    assert all(client.check(lease) is not None for lease in leases), "a lock was lost in a manual failover"
    assert client.acquire_many(names, TTL).acquired == []
    assert client.release_many(leases) == [True] * len(leases)
    assert list(raws(replica).scan_iter(match=key_prefix + "*")) == []
