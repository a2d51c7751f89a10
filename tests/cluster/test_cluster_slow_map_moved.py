"""A single MOVED (a finished resharding) after a slow map read: the round that met it read the
map from a busy node (here paused 0.35 s), which is no measure of how long the resend will take.
The command is sent again to the new master within the call's deadline. (A rule that budgeted a
resend by the whole last round, map read included, ended this call in ClusterError with 0.6 s of
its 1 s left.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from turbolock._flows import cluster_routes
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import node_id

pytestmark = pytest.mark.timing

T = 1.0
PAUSE = 0.35


def test_a_single_moved_after_a_slow_map_read_is_followed(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: Callable[[RedisServer], redis.Redis], monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    # The map's slow refresh (every 60 s: a call reads it again), sooner so the test is short.
    monkeypatch.setattr(cluster_routes, "MAP_MAX_AGE", 0.5)
    client = make_cluster_client(cluster, timeout=T, connect_timeout=T)
    routes = client._cluster.routes
    masters = {node.port: node for node in cluster.nodes[: cluster.masters]}
    assert client.query("warm-up").held is False  # the map is read
    assert routes.map is not None
    asked = masters[routes.map.masters[0][1]]  # the node a refresh asks first
    name = next(f"job:{i}" for i in range(10000)
                if cluster.master_of(key_slot(f"{key_prefix}job:{i}".encode())).port != asked.port)
    slot = key_slot((key_prefix + name).encode())
    src = cluster.master_of(slot)
    dst = next(node for port, node in masters.items() if port not in (asked.port, src.port))
    # a connection to the node asked first, in the pool (as after any call there)
    probe = next(f"p:{i}" for i in range(10000)
                 if cluster.master_of(key_slot(f"{key_prefix}p:{i}".encode())).port == asked.port)
    assert client.query(probe).held is False
    time.sleep(0.6)  # the map is due for its refresh

    asked.pause()
    outcome: list[object] = []

    def acquire() -> None:
        started = time.monotonic()
        try:
            outcome.append(client.try_acquire(name, 10))
        except Exception as exc:
            outcome.append(exc)
        outcome.append(time.monotonic() - started)

    caller = threading.Thread(target=acquire)
    caller.start()
    time.sleep(0.05)  # its CLUSTER SHARDS waits in the paused node's socket
    # Meanwhile the slot moves, src -> dst (what redis-cli --cluster reshard does; no keys in it).
    s, d = raws(src), raws(dst)
    dst_id = node_id(d)
    d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(s))
    s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    for node in (s, d):
        node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    time.sleep(PAUSE - 0.05)
    asked.resume()  # answers the map it had: src serves the slot
    raws(asked).execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)  # and learns the move
    caller.join()
    result, took = outcome
    assert not isinstance(result, Exception), f"{result!r} after {took:.2f}s of the {T}s deadline"
    assert result is not None and d.get(key_prefix + name) == result.token  # type: ignore[attr-defined]
