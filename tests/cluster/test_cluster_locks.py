"""ClusterLockClient on a real cluster: each lock lives on the master of its slot (checked on
that node itself), with the single-server client's answers for one lock, the Lock object and
the bulk calls; what is not supported yet is refused before anything is sent."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from _raw import NodeRaws
from turbolock import (
    AcquireManyResult,
    ClusterError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockNotAcquiredError,
    ProtocolError,
)
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

TTL = 10


def _holder(cluster: RedisCluster, raws: NodeRaws, key: bytes) -> tuple[RedisServer, bytes | None]:
    """The master of ``key``'s slot, and the value that node itself holds."""
    node = cluster.master_of(key_slot(key))
    value = raws(node).get(key)
    return node, value


def test_locks_spread_over_every_master_and_live_where_their_slot_is(
        cluster: RedisCluster, cluster_client: ClusterLockClient, key_prefix: str, raws: NodeRaws) -> None:
    names = [f"order:{i}" for i in range(60)]
    leases = [cluster_client.try_acquire(name, TTL) for name in names]
    assert all(lease is not None for lease in leases)
    masters = set()
    for lease in leases:
        assert lease is not None
        node, value = _holder(cluster, raws, key_prefix.encode() + lease.key)
        assert value == lease.token, f"{lease.name} is not on the master of its slot"
        masters.add(node.port)
    assert len(masters) == 3, "60 names should land on all three masters"
    assert all(cluster_client.try_acquire(name, TTL) is None for name in names[:10])
    for lease in leases:
        assert lease is not None
        assert 0 < (cluster_client.check(lease) or 0) <= TTL
        assert cluster_client.extend(lease, 20)
        assert cluster_client.query(lease.name).held
        assert cluster_client.release(lease) is True
        assert cluster_client.release(lease) is False
        assert not cluster_client.query(lease.name).held


def test_hash_tags_keep_locks_on_one_master(cluster: RedisCluster, cluster_client: ClusterLockClient,
                                            key_prefix: str) -> None:
    names = [f"{{account:42}}:transfer:{i}" for i in range(20)]
    leases = cluster_client.acquire_many(names, TTL).acquired
    assert len(leases) == 20
    assert len({cluster.master_of(key_slot(key_prefix.encode() + lease.key)).port for lease in leases}) == 1
    assert cluster_client.release_many(leases) == [True] * 20


def test_the_lock_object(cluster_client: ClusterLockClient) -> None:
    lock = cluster_client.lock("job:nightly", TTL, blocking=False)
    other = cluster_client.lock("job:nightly", TTL, blocking=False)
    with lock:
        assert lock.owned() and other.locked() and not other.acquire()
        with pytest.raises(LockNotAcquiredError):
            with other:
                pass
        assert lock.extend(15) and 10 < lock.remaining() <= 15
    assert not lock.locked() and other.acquire()
    other.release()


def test_bulk_calls_split_per_master(cluster: RedisCluster, cluster_client: ClusterLockClient,
                                     key_prefix: str, raws: NodeRaws) -> None:
    names = [f"sku:{i}" for i in range(3000)]
    held_elsewhere = cluster_client.try_acquire("sku:17", TTL)
    assert held_elsewhere is not None
    result: AcquireManyResult = cluster_client.acquire_many(names, TTL)
    assert [name for name in result.not_acquired] == ["sku:17"]
    assert len(result.acquired) == 2999
    for lease in result.acquired[::97]:
        _, value = _holder(cluster, raws, key_prefix.encode() + lease.key)
        assert value == lease.token
    infos = cluster_client.query_many(names)
    assert all(info.held for info in infos)
    assert cluster_client.extend_many(result.acquired, 30) == [True] * 2999
    assert all(25 < (cluster_client.check(lease) or 0) <= 30 for lease in result.acquired[::500])
    assert cluster_client.release_many(result.acquired) == [True] * 2999
    assert cluster_client.release(held_elsewhere)
    assert not any(info.held for info in cluster_client.query_many(names))


def test_all_or_nothing_takes_nothing_when_one_is_held(cluster_client: ClusterLockClient) -> None:
    names = [f"seat:{i}" for i in range(300)]
    blocker = cluster_client.try_acquire("seat:250", TTL)
    assert blocker is not None
    result = cluster_client.acquire_many(names, TTL, all_or_nothing=True)
    assert result.acquired == [] and result.not_acquired == ["seat:250"]
    assert sum(info.held for info in cluster_client.query_many(names)) == 1
    assert cluster_client.release(blocker)


def test_a_lock_without_a_ttl_is_renewed_until_released(cluster_client: ClusterLockClient) -> None:
    with cluster_client.lock("nightly-report") as lock:  # 30 s, renewed
        assert cluster_client.renewing == 1 and lock.owned()
        left = lock.remaining()
        assert left is not None and 29 < left <= 30
    assert cluster_client.renewing == 0 and not cluster_client.query("nightly-report").held


def test_bad_cluster_settings_are_refused(cluster: RedisCluster, redis_server: RedisServer) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        ClusterLockClient.from_url(cluster.url.replace("/0", "/2"))
    assert info.value.argument == "db"
    with pytest.raises(InvalidArgumentError) as info:
        ClusterLockClient.from_url("unix:///tmp/redis.sock")
    assert info.value.argument == "unix_socket_path"
    with pytest.raises(InvalidArgumentTypeError) as type_info:
        ClusterLockClient(startup_nodes="redis://127.0.0.1:7000")
    assert type_info.value.argument == "startup_nodes"
    with pytest.raises(InvalidArgumentTypeError) as type_info:
        ClusterLockClient(startup_nodes=[("127.0.0.1", "7000")])
    assert type_info.value.argument == "startup_nodes"
    # A plain server is not a cluster: said when the map is first needed, naming the node.
    with ClusterLockClient.from_url(redis_server.url, timeout=2) as plain:
        with pytest.raises(ProtocolError, match="not a Redis Cluster node") as error:
            plain.try_acquire("x", TTL)
        assert f"{redis_server.port}" in str(error.value)


def test_start_up_nodes_stand_in_for_a_node_that_is_down(cluster: RedisCluster, key_prefix: str,
                                                          core_name: str) -> None:
    from turbolock.redis_server import free_port

    dead = free_port()
    startup = [cluster.nodes[2].url, ("127.0.0.1", cluster.nodes[3].port)]
    with ClusterLockClient("127.0.0.1", dead, startup_nodes=startup, key_prefix=key_prefix, core=core_name,
                           connect_timeout=0.5) as client:
        lease = client.try_acquire("failover-start", TTL)
        assert lease is not None and client.release(lease)


def test_no_reachable_node_is_a_typed_error_within_the_deadline(key_prefix: str, core_name: str) -> None:
    from turbolock import ClusterError
    from turbolock.redis_server import free_port

    with ClusterLockClient("127.0.0.1", free_port(), startup_nodes=[("127.0.0.1", free_port())],
                           key_prefix=key_prefix, core=core_name, timeout=0.5, connect_timeout=0.5) as client:
        started = time.monotonic()
        with pytest.raises(ClusterError, match="no cluster node gave a slot map") as info:
            client.try_acquire("nobody-home", TTL)
        assert time.monotonic() - started < 1.5
        assert "Connection refused" in str(info.value) or "connect" in str(info.value)


def test_start_up_nodes_of_two_clusters_are_refused_before_anything_is_written(
        cluster: RedisCluster, own_cluster: Callable[..., RedisCluster], redis_server: RedisServer,
        key_prefix: str, core_name: str) -> None:
    other = own_cluster(masters=3, replicas=0)
    for startup, message in ((other.nodes[1].url, "belongs to another cluster"),
                             (redis_server.url, "is not a Redis Cluster node")):
        with ClusterLockClient.from_url(cluster.url, startup_nodes=[startup], key_prefix=key_prefix,
                                        core=core_name) as client:
            for _ in range(2):  # refused again on the next call: the map is not kept
                with pytest.raises(ClusterError, match=message):
                    client.try_acquire("two-clusters", TTL)
    with ClusterLockClient.from_url(cluster.url, key_prefix=key_prefix, core=core_name) as client:
        assert not client.query("two-clusters").held
    with ClusterLockClient.from_url(cluster.url, startup_nodes=[cluster.nodes[4].url],  # a replica of it
                                    key_prefix=key_prefix, core=core_name) as client:
        lease = client.try_acquire("one-cluster", TTL)
        assert lease is not None and client.release(lease)


def test_empty_bulk_calls_send_nothing_and_return_nothing(cluster_client: ClusterLockClient) -> None:
    assert cluster_client.acquire_many([], TTL).acquired == []
    assert cluster_client.release_many([]) == [] and cluster_client.extend_many([], TTL) == []
    assert cluster_client.query_many([]) == []
