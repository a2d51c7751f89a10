"""What cluster tests do by hand on the nodes themselves (redis-py on one node, no redirects)."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import redis

from _blocking_async import Fronts
from turbolock._wire.slots import key_slot
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer


def node_id(raw: redis.Redis) -> str:
    found = raw.execute_command("CLUSTER", "MYID")
    return found.decode() if isinstance(found, bytes) else str(found)


def asking_get(raw: redis.Redis, key: bytes) -> object:
    """GET on a node importing the key's slot (it redirects a GET without ASKING)."""
    pipe = raw.pipeline(transaction=False)
    pipe.execute_command("ASKING")
    pipe.get(key)
    return pipe.execute()[1]


def replicated(cluster: RedisCluster, node: RedisServer, raw: redis.Redis) -> int:
    """Replicas that have every write ``node`` took so far: WAIT counts the writes of its own
    connection, so this one writes a key of ``node``'s slots first (replication is in order)."""
    i = 0
    while cluster.master_of(key_slot(f"sync:{i}".encode())).port != node.port:
        i += 1
    raw.set(f"sync:{i}", 1, px=1000)
    return int(raw.execute_command("WAIT", 1, 2000))


def start_slot_move(src: redis.Redis, dst: redis.Redis, slot: int) -> str:
    """What ``redis-cli --cluster reshard`` does first: ``slot`` IMPORTING on ``dst``, MIGRATING on
    ``src``; ``dst``'s node id."""
    dst_id = node_id(dst)
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(src))
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    return dst_id


def finish_slot_move(src: redis.Redis, dst: redis.Redis, target: RedisServer, slot: int, keys: list[bytes],
                     dst_id: str) -> None:
    """Then: ``keys`` MIGRATEd to ``target`` (``dst``'s server) and ``slot`` given to it on both."""
    if keys:
        src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys)
    for node in (src, dst):
        node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)


def move_slot(cluster: RedisCluster, raws: Callable[[RedisServer], redis.Redis], source: RedisServer,
              target: RedisServer, slot: int, keys: list[bytes]) -> str:
    """``slot`` and its ``keys`` moved from ``source`` to ``target``, every master told (a client
    learns it only from a redirect or a read of the map); ``target``'s node id."""
    src, dst = raws(source), raws(target)
    dst_id = start_slot_move(src, dst, slot)
    finish_slot_move(src, dst, target, slot, keys, dst_id)
    for node in cluster.nodes[:cluster.masters]:
        if node.port not in (source.port, target.port):
            raws(node).execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    return dst_id


def other_master(cluster: RedisCluster, source: RedisServer) -> RedisServer:
    for node in cluster.nodes[: cluster.masters]:
        if node.port != source.port:
            return node
    raise AssertionError("no other master")


def names_on(cluster: RedisCluster, prefix: str, port: int, count: int, stem: str,
             elsewhere: bool = False) -> list[str]:
    """``count`` lock names (``stem:i``) whose keys the master on ``port`` serves (with
    ``elsewhere``: that another master serves), by one read of the slot map."""
    owners = slot_owners(cluster)
    names: list[str] = []
    i = 0
    while len(names) < count:
        name = f"{stem}:{i}"
        if (owners[key_slot((prefix + name).encode())] == port) != elsewhere:
            names.append(name)
        i += 1
    return names


def slot_owners(cluster: RedisCluster) -> list[int]:
    """The port of the master serving each slot, as the first node's CLUSTER SLOTS says."""
    owners = [0] * 16384
    raw = redis.Redis(host=cluster.nodes[0].host, port=cluster.nodes[0].port)
    try:
        for low, high, master, *_ in raw.execute_command("CLUSTER", "SLOTS"):
            owners[low:high + 1] = [int(master[1])] * (high - low + 1)
    finally:
        raw.close()
    return owners


def replica_of(cluster: RedisCluster, master: RedisServer) -> RedisServer:
    """The running replica that follows ``master`` (ROLE says whom each node follows)."""
    for node in cluster.nodes:
        if node.running:
            role = cluster.cli(node, "role").split()
            if role[:1] == ["slave"] and int(role[2]) == master.port:
                return node
    raise AssertionError(f"no replica follows {master.port}")


def fail_over(cluster: RedisCluster, replica: RedisServer, *options: str) -> None:
    """``CLUSTER FAILOVER`` on ``replica`` until it is master: a coordinated one that gets no
    majority of votes within its 5 s is abandoned by Redis, and an operator asks again."""
    for _ in range(3):
        assert "OK" in cluster.cli(replica, "cluster", "failover", *options)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            if "role:master" in cluster.cli(replica, "info", "replication"):
                return
            time.sleep(0.1)
    raise AssertionError("the replica did not take over after three CLUSTER FAILOVER")


def cluster_fronts(front: str, url: str, core_name: str, key_prefix: str, **options: Any) -> Fronts:
    """``Fronts`` of ClusterLockClients, or of their asyncio twins, starting from ``url``."""
    return Fronts(front, partial(ClusterLockClient.from_url, url),
                  partial(AsyncClusterLockClient.from_url, url), core=core_name,
                  key_prefix=key_prefix, **options)
