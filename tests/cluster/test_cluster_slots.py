"""Slot hashing and the slot map against a real cluster: ``key_slot`` agrees with the server's
``CLUSTER KEYSLOT`` and with redis-py's, hash tags included; the map read from ``CLUSTER SHARDS``
and from ``CLUSTER SLOTS`` names the master the cluster itself names for every slot."""

from __future__ import annotations

import random
import time

import pytest
import redis
from redis.crc import key_slot as redis_py_key_slot

from turbolock._wire.core import get_core
from turbolock._wire.slot_map import map_from_shards, map_from_slots, redirect_of
from turbolock._wire.slots import SLOTS, key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.errors import ReplyError
from turbolock.redis_cluster import RedisCluster


def _keys() -> list[bytes]:
    rng = random.Random(7)
    keys = [b"", b"a", b"lock:1", b"{user:1}:a", b"{user:1}:b", b"{}x", b"{x", b"x}{y}", b"{a}{b}",
            b"a{b}c{d}", b"{{a}}", "ключ".encode(), bytes(range(256))]
    keys += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(300)]
    keys += [f"turbolock:{{shard-{i}}}:{i}".encode() for i in range(50)]
    return keys


def test_key_slot_agrees_with_the_server_and_redis_py(cluster: RedisCluster) -> None:
    raw = redis.Redis(host=cluster.nodes[0].host, port=cluster.nodes[0].port)
    try:
        for key in _keys():
            expected = int(raw.execute_command("CLUSTER", "KEYSLOT", key))
            assert key_slot(key) == expected, key
            assert redis_py_key_slot(key) == expected, key
    finally:
        raw.close()


@pytest.mark.parametrize("prefix", [b"", b"turbolock:", b"{tag}:", b"t{", b"x}", b"{"])
def test_each_cores_key_slots_agree_with_the_server(cluster: RedisCluster, core_name: str,
                                                    prefix: bytes) -> None:
    # The C core finds a hash tag across the prefix and the key without joining them: prefixes
    # that open or close a tag are the cases where it could go wrong.
    keys = _keys()
    raw = redis.Redis(host=cluster.nodes[0].host, port=cluster.nodes[0].port)
    try:
        expected = [int(raw.execute_command("CLUSTER", "KEYSLOT", prefix + key)) for key in keys]
    finally:
        raw.close()
    assert get_core(core_name).key_slots(prefix, keys) == expected


def test_hash_tags_put_keys_in_one_slot() -> None:
    assert key_slot(b"{user:1}:a") == key_slot(b"{user:1}:b") == key_slot(b"user:1")
    assert key_slot(b"{}x") != key_slot(b"x")  # an empty tag hashes the whole key
    assert 0 <= key_slot(b"anything") < SLOTS


def _owner_by_cluster_nodes(cluster: RedisCluster) -> dict[int, tuple[str, int]]:
    owner: dict[int, tuple[str, int]] = {}
    for line in cluster.cli(cluster.nodes[0], "cluster", "nodes").splitlines():
        fields = line.split()
        if len(fields) < 9 or "master" not in fields[2]:
            continue
        host, port = fields[1].split("@")[0].rsplit(":", 1)
        for part in fields[8:]:
            low, _, high = part.partition("-")
            for slot in range(int(low), int(high or low) + 1):
                owner[slot] = (host, int(port))
    return owner


def test_the_map_names_each_slots_master(cluster: RedisCluster, cluster_client: ClusterLockClient) -> None:
    expected = _owner_by_cluster_nodes(cluster)
    assert len(expected) == SLOTS
    # The replies as this test's core reads them, from a node's own connection.
    node = cluster_client._cluster.node((cluster.nodes[1].host, cluster.nodes[1].port))
    deadline = time.monotonic() + 5
    shards = node.command_one((b"CLUSTER", b"SHARDS"), deadline)
    slots = node.command_one((b"CLUSTER", b"SLOTS"), deadline)
    for slot_map in (map_from_shards(shards, "127.0.0.1"), map_from_slots(slots, "127.0.0.1")):
        assert slot_map.complete
        assert len(slot_map.masters) == 3
        assert all(slot_map.node_of(slot) == expected[slot] for slot in range(SLOTS))


def test_the_map_is_read_again_once_it_is_older_than_its_max_age(cluster_client: ClusterLockClient) -> None:
    routes = cluster_client._cluster.routes
    cluster_client.query("first")
    first = routes.map
    assert first is not None
    for i in range(20):  # calls within the map's age use it as it is (the control)
        cluster_client.query(f"n{i}")
    assert routes.map is first
    routes.max_age = 0.2
    routes.stale = True  # read once more so that the shorter age applies
    cluster_client.query("again")
    second = routes.map
    assert second is not first
    time.sleep(0.3)
    cluster_client.query("later")
    assert routes.map is not second, "a map older than its max age was used without being read again"
    assert cluster_client.acquire_many([f"b{i}" for i in range(50)], 10).all_acquired


def test_redirect_replies_are_read() -> None:
    moved = redirect_of(ReplyError("MOVED 3999 127.0.0.1:6381"), "10.0.0.1")
    assert moved is not None and not moved.ask and moved.slot == 3999 and moved.address == ("127.0.0.1", 6381)
    asked = redirect_of(ReplyError("ASK 12 :7000"), "10.0.0.1")
    assert asked is not None and asked.ask and asked.address == ("10.0.0.1", 7000)
    assert redirect_of(ReplyError("NOSCRIPT No matching script"), "h") is None
    assert redirect_of(b"OK", "h") is None
