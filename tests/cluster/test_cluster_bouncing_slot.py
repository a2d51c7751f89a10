"""A key whose slot two masters each say the other serves (what a failover looks like for a
moment: the old master already redirects, the new one does not serve yet): a single-key call
follows the bounce until the masters agree, within its deadline, and fails with
``ClusterError`` within its deadline when they never do. A few quick bounces once ended the
call at once, a blocking acquire included, with seconds of its wait left."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from turbolock import ClusterError
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import node_id, other_master

pytestmark = pytest.mark.timing  # the call's time against its deadline

TTL = 10
T = 1.0
"""The client's call timeout."""


def _bounce(src: redis.Redis, dst: redis.Redis, slot: int) -> tuple[str, str]:
    """Each of the two masters says the other serves ``slot`` (no keys in it)."""
    src_id, dst_id = node_id(src), node_id(dst)
    src.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    dst.execute_command("CLUSTER", "SETSLOT", slot, "NODE", src_id)
    return src_id, dst_id


@pytest.mark.parametrize("settles", [True, False], ids=["settles", "never-settles"])
def test_a_bouncing_slot_is_followed_within_the_deadline(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: Callable[[RedisServer], redis.Redis], settles: bool) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    client = make_cluster_client(cluster, timeout=T, connect_timeout=T)
    name = "{bouncing}:job"
    slot = key_slot((key_prefix + name).encode())
    owner = cluster.master_of(slot)
    other = other_master(cluster, owner)
    src, dst = raws(owner), raws(other)
    assert client.query(name).held is False  # the map is read: the key's master is known
    src_id, _ = _bounce(src, dst, slot)

    def agree() -> None:
        time.sleep(0.3)
        for node in (src, dst):
            node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", src_id)

    fixer = threading.Thread(target=agree)
    if settles:
        fixer.start()
    started = time.monotonic()
    try:
        if settles:
            lease = client.try_acquire(name, TTL)
            assert lease is not None
            assert src.get(key_prefix + name) == lease.token
        else:
            with pytest.raises(ClusterError):
                client.try_acquire(name, TTL)
        took = time.monotonic() - started
        assert took < T + 0.5, f"the call took {took:.2f}s against its {T}s deadline"
    finally:
        if settles:
            fixer.join()
        else:
            agree()
