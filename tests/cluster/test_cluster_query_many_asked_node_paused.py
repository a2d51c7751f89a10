"""A Redis Cluster ``query_many`` whose key is sent on by ASK (its slot half migrated, the key
not on the source) to an importing node that does not answer raises ``TimeoutError``, as the
same read to a stopped master does. It raised the broken connection's ``ConnectionError`` ("the
connection failed mid-batch"): the ASK step turned the timeout into an unknown outcome, which a
read reports as a failed connection (found in review)."""

from __future__ import annotations

import time

import pytest
import redis

from _blocking_async import FRONTS
from turbolock import TimeoutError
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster

from ._helpers import cluster_fronts, other_master, start_slot_move

T = 1.0


# One core: the ASK step is the flows', written once.
@pytest.mark.parametrize("core_name", ["c"], indirect=True)
@pytest.mark.parametrize("front", FRONTS)
def test_query_many_of_an_asked_key_whose_node_stopped_raises_a_timeout(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str, front: str) -> None:
    cluster = quiet_cluster
    name = f"{{mv{front}}}:x"
    slot = key_slot((key_prefix + name).encode())
    source = cluster.master_of(slot)
    target = other_master(cluster, source)
    src, dst = redis.Redis(port=source.port), redis.Redis(port=target.port)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=T)
    start_slot_move(src, dst, slot)
    try:
        client = fronts.make()
        assert client.acquire_many([name + "warm"], 30).acquired  # by ASK: a connection to the target
        target.pause()
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutError) as caught:
                client.query_many([name])
            took = time.monotonic() - started
        finally:
            target.resume()
        assert took < T + 0.5, f"query_many took {took:.2f}s"
        assert f":{target.port}" in str(caught.value), caught.value
    finally:
        fronts.close()
        for node in (src, dst):
            node.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
        src.close()
        dst.close()
