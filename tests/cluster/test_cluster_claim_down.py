"""A claim (``acquire_many(..., limit=k)``) on a Redis Cluster that is down (a master failed and
is not yet replaced, with full coverage required): the claim script, keys in ARGV, is refused
with a plain ERR ("Script attempted to execute a command while the cluster is down") before it
takes anything, where a command with declared keys gets CLUSTERDOWN. It was a ResponseError at
once (the class of WRONGTYPE and script errors), where every other call backs off within its
deadline. Now the chunk is sent again until the deadline, and a cluster still down then is the
same TimeoutError naming CLUSTERDOWN. Found in review.

The down state is made exact and brief: one master forgets one of its own slots (CLUSTER
DELSLOTS) and, requiring full coverage, calls the cluster down until it takes the slot back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from _blocking_async import FRONTS
from turbolock._wire.slots import key_slot
from turbolock.errors import TimeoutError
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, slot_owners

TIMEOUT = 1.5
NAMES = [f"{{down}}:{i}" for i in range(6)]


@pytest.fixture(scope="module")
def down_cluster() -> Iterator[RedisCluster]:
    with RedisCluster(masters=3, replicas=0) as made:
        yield made


def _spare_slot(cluster: RedisCluster, node: RedisServer, busy: int) -> int:
    """Another slot of ``node``'s, with no key of the test in it."""
    owners = slot_owners(cluster)
    return next(slot for slot in range(16384) if slot != busy and owners[slot] == node.port)


def _the_names_master(cluster: RedisCluster, key_prefix: str, raws: Callable[[RedisServer], redis.Redis]
                      ) -> tuple[int, RedisServer, redis.Redis, int]:
    """The names' slot, its master, a raw client of it and a spare slot of that master."""
    slot = key_slot((key_prefix + NAMES[0]).encode())
    node = cluster.master_of(slot)
    return slot, node, raws(node), _spare_slot(cluster, node, slot)


def _down(raw: redis.Redis, slot: int) -> None:
    raw.execute_command("CLUSTER", "DELSLOTS", slot)
    assert b"cluster_state:fail" in raw.execute_command("CLUSTER", "INFO")


def _up(raw: redis.Redis, slot: int) -> None:
    raw.execute_command("CLUSTER", "ADDSLOTS", slot)


@pytest.mark.parametrize("front", FRONTS)
def test_a_claim_rides_out_a_cluster_down_within_its_deadline(
        down_cluster: RedisCluster, core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str) -> None:
    slot, _, raw, spare = _the_names_master(down_cluster, key_prefix, raws)
    fronts = cluster_fronts(front, down_cluster.url, core_name, key_prefix, timeout=TIMEOUT)
    try:
        client = fronts.make()
        client.release_many(client.acquire_many(NAMES[:1], 30).acquired)  # the map read, the node known
        _down(raw, spare)
        back = threading.Timer(0.5, _up, (raw, spare))
        back.start()
        started = time.monotonic()
        try:
            result = client.acquire_many(NAMES, 30, limit=2)
        finally:
            back.join()
        took = time.monotonic() - started
        assert len(result.acquired) == 2 and len(result.not_tried) == 4
        assert 0.45 < took < TIMEOUT, took
        assert raw.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 2
        assert client.release_many(result.acquired) == [True, True]
    finally:
        fronts.close()


@pytest.mark.parametrize("front", FRONTS)
def test_a_claim_refused_as_down_to_its_deadline_is_a_timeout_holding_nothing(
        down_cluster: RedisCluster, core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str) -> None:
    slot, node, raw, spare = _the_names_master(down_cluster, key_prefix, raws)
    owners = slot_owners(down_cluster)
    other = next(name for name in (f"elsewhere{i}" for i in range(100))
                 if owners[key_slot((key_prefix + name).encode())] != node.port)
    fronts = cluster_fronts(front, down_cluster.url, core_name, key_prefix, timeout=TIMEOUT)
    try:
        client = fronts.make()
        client.release_many(client.acquire_many(NAMES[:1], 30).acquired)
        _down(raw, spare)
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutError, match="CLUSTERDOWN"):
                # A name of a healthy master too: whatever it gave is given back.
                client.acquire_many([other, *NAMES], 30, limit=3)
            took = time.monotonic() - started
        finally:
            _up(raw, spare)
        assert took < TIMEOUT + 0.5, took
        assert raw.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
        ends = time.monotonic() + 5
        while client.query(other).held and time.monotonic() < ends:
            time.sleep(0.05)  # given back in the background, when that master was claimed from first
        assert not client.query(other).held
    finally:
        fronts.close()
