"""A process forked while another thread of the parent reads the slot map, or opens a node's pool:
the locks that thread held are the parent's. They were kept in the child, held by a thread that
is not there: every call of the child needing the map failed with ``ClusterError`` ("another
call's read of it is still going on") for good, or hung past its deadline. Found in review."""

from __future__ import annotations

import threading
import time

import pytest

from _forking import in_child_forked_while_held, in_forked_child
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the same at-fork code on both


def _take_and_release(client: ClusterLockClient) -> str:
    try:
        lease = client.try_acquire("child", 10)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    if lease is None:
        return "not acquired"
    return "acquired" if client.release(lease) else "not released"


def test_a_child_forked_during_a_map_read_has_a_map(quiet_cluster: RedisCluster, core_name: str,
                                                    key_prefix: str) -> None:
    first = quiet_cluster.nodes[0]
    others = [node.url for node in quiet_cluster.nodes if node is not first]
    client = ClusterLockClient.from_url(first.url, startup_nodes=others, core=core_name,
                                        key_prefix=key_prefix, timeout=2.0)
    try:
        first.pause()  # the first map read asks this node first, and waits for it
        try:
            reading = threading.Thread(target=lambda: client.try_acquire("parent", 10), daemon=True)
            reading.start()
            time.sleep(0.5)  # the parent's thread is reading the map, holding its lock

            def work() -> str:
                time.sleep(2.5)  # the parent's read has ended (in the parent)
                return _take_and_release(client)

            reported = in_forked_child(work, first.resume, limit=10.0)
        finally:
            first.resume()
        reading.join(10)
        assert reported == "acquired", reported
    finally:
        client.close()


def test_a_child_forked_while_a_node_pool_is_made_can_call(quiet_cluster: RedisCluster, core_name: str,
                                                           key_prefix: str) -> None:
    client = ClusterLockClient.from_url(quiet_cluster.url, core=core_name, key_prefix=key_prefix, timeout=1.0)
    try:
        # where another thread's first call to a node is for a moment
        assert in_child_forked_while_held(client._cluster._nodes_lock, lambda: _take_and_release(client),
                                          limit=8.0) == "acquired"
    finally:
        client.close()
