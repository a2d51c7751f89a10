"""Claims (``acquire_many(limit=k)``) after the slot map changed under the client (a slot moved,
a coordinated failover): every other call follows the MOVED reply, and a claim failed with a
ResponseError ("Script attempted to access a non local key", READONLY) until some other call
refreshed the map (found by review). The claim now reads the map again and claims those names
from the masters that serve them now."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from _blocking_async import FRONTS
from _raw import NodeRaws
from turbolock import ResponseError
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster

from ._helpers import (
    cluster_fronts,
    fail_over,
    finish_slot_move,
    other_master,
    replica_of,
    slot_owners,
    start_slot_move,
)

TTL = 30


@pytest.mark.parametrize("front", FRONTS)
def test_claim_after_a_slot_move_the_client_did_not_see(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, raws: NodeRaws,
        front: str) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=2.0)
    try:
        client = fronts.make()
        names = [f"{{claimmove}}:{i}" for i in range(5)]
        slot = key_slot((key_prefix + names[0]).encode())
        first = client.acquire_many(names, TTL, limit=1)  # the client reads the slot map
        assert len(first.acquired) == 1
        assert client.release_many(first.acquired) == [True]
        source = cluster.master_of(slot)
        target = other_master(cluster, source)
        src, dst = raws(source), raws(target)
        finish_slot_move(src, dst, target, slot, [], start_slot_move(src, dst, slot))
        # A try_acquire here would follow MOVED and succeed; so must a claim.
        result = client.acquire_many(names, TTL, limit=2)
        assert len(result.acquired) == 2
        assert all(dst.get(key_prefix.encode() + lease.key) == lease.token for lease in result.acquired)
        assert client.release_many(result.acquired) == [True, True]
    finally:
        fronts.close()


@pytest.mark.parametrize("front", FRONTS)
def test_a_claim_with_given_tokens_is_not_claimed_again_after_a_slot_move(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, raws: NodeRaws,
        front: str) -> None:
    """With caller-given tokens the node's refusal stands (the caller claims again): the part's
    locks are released in the background with those tokens, and could delete a lock claimed
    again with the same token. Nothing is left held once that release is made."""
    cluster = own_cluster(masters=3, replicas=0)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=2.0)
    try:
        client = fronts.make()
        names = [f"{{claimgiven}}:{i}" for i in range(5)]
        tokens = [f"token-of-shard-{i}".encode() for i in range(5)]
        slot = key_slot((key_prefix + names[0]).encode())
        first = client.acquire_many(names, TTL, limit=1, tokens=tokens)  # the client reads the map
        assert client.release_many(first.acquired) == [True]
        source = cluster.master_of(slot)
        target = other_master(cluster, source)
        src, dst = raws(source), raws(target)
        finish_slot_move(src, dst, target, slot, [], start_slot_move(src, dst, slot))
        with pytest.raises(ResponseError, match="non local key"):
            client.acquire_many(names, TTL, limit=2, tokens=tokens)
        deadline = time.monotonic() + 5
        while any(client.query(name).held for name in names):
            assert time.monotonic() < deadline, "a lock of the refused claim was left held"
            time.sleep(0.05)
        again = client.acquire_many(names, TTL, limit=2, tokens=tokens)  # the map is fresh now
        assert len(again.acquired) == 2 and client.release_many(again.acquired) == [True, True]
    finally:
        fronts.close()


@pytest.mark.parametrize("front", FRONTS)
def test_claim_after_a_coordinated_failover(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, front: str) -> None:
    cluster = own_cluster(masters=3, replicas=1)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=2.0)
    try:
        client = fronts.make()
        old = cluster.nodes[0]
        names = [f"{{claimfo}}:{i}" for i in range(5)]
        slot = key_slot((key_prefix + names[0]).encode())
        tag = 0
        while cluster.master_of(slot).port != old.port:  # a tag served by the master that steps down
            tag += 1
            names = [f"{{claimfo{tag}}}:{i}" for i in range(5)]
            slot = key_slot((key_prefix + names[0]).encode())
        first = client.acquire_many(names, TTL, limit=1)
        assert len(first.acquired) == 1
        assert client.release_many(first.acquired) == [True]
        fail_over(cluster, replica_of(cluster, old))
        cluster.wait_ok()
        result = client.acquire_many(names, TTL, limit=2)
        assert len(result.acquired) == 2
        assert client.release_many(result.acquired) == [True, True]
    finally:
        fronts.close()


def _tags_on(cluster: RedisCluster, prefix: str, port: int, count: int) -> list[str]:
    """``count`` hash tags of different slots that the master at ``port`` serves."""
    owners = slot_owners(cluster)
    tags: list[str] = []
    slots: set[int] = set()
    i = 0
    while len(tags) < count:
        tag = f"t{i}"
        slot = key_slot(f"{prefix}{{{tag}}}".encode())
        if owners[slot] == port and slot not in slots:
            tags.append(tag)
            slots.add(slot)
        i += 1
    return tags


@pytest.mark.parametrize("front", FRONTS)
def test_a_claim_after_one_of_a_masters_slots_moved_takes_every_free_name(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, raws: NodeRaws,
        front: str) -> None:
    """Eight names in one slot of a master, a ninth in another slot of it that moved away: the
    refused part had set some names before meeting the moved one (a script is not undone), and
    the claim counted those, its own, as held by others: fewer than the nine free names (found
    by review). They are released before the names are claimed again."""
    cluster = own_cluster(masters=3, replicas=0)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=2.0)
    try:
        client = fronts.make()
        source = cluster.nodes[0]
        target = other_master(cluster, source)
        src, dst = raws(source), raws(target)
        for round_ in range(3):
            stay, move = _tags_on(cluster, f"{key_prefix}r{round_}", source.port, 2)
            names = [f"r{round_}{{{stay}}}:{i}" for i in range(8)] + [f"r{round_}{{{move}}}:0"]
            first = client.acquire_many(names, TTL, limit=1)  # the client reads the map
            assert client.release_many(first.acquired) == [True]
            slot = key_slot((key_prefix + names[-1]).encode())
            finish_slot_move(src, dst, target, slot, [], start_slot_move(src, dst, slot))
            result = client.acquire_many(names, TTL, limit=len(names))
            assert sorted(lease.name for lease in result.acquired) == sorted(names), result.not_acquired
            assert client.release_many(result.acquired) == [True] * len(names)
    finally:
        fronts.close()
