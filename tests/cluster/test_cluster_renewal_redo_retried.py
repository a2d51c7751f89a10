"""A renewal round on Redis Cluster tries again the redo that failed at once, while the round
has time. A slot moved off a healthy master, its keys redone key by key, and the master that
now serves it refused the client's connection at that moment (here: ``maxclients`` reached for
0.3 s; a node restarting, or any connect refused, does much the same): the redo left them
undecided, and with another master stalled the round waited for it until just before their
expiry, so the renewer could never retry them. Every lock of the moved slot was reported lost,
with every master but the stalled one answering."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from _lost_locks import LostLocks
from _raw import NodeRaws
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster

from ._helpers import cluster_fronts, move_slot, names_on

MOVED = 50
STALLED = 10
TTL = 3.0
REFUSING = 2.3
"""Seconds after the acquire during which the slot's new master refuses new connections: past
the first renewal (at 2 s, a third of the ttl before expiry), well before the round's end (just
before 3 s). The client never had a connection to it: the acquire went to the other two."""


@pytest.mark.timing
@pytest.mark.parametrize("core_name", ["c"], indirect=True)
@pytest.mark.parametrize("front", FRONTS)
def test_a_redo_that_failed_at_once_is_tried_again_within_the_round(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, raws: NodeRaws,
        front: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=5.0)
    refusing: list[redis.Redis] = []
    try:
        client = fronts.make()
        # The stalled master is the last the client asks for the map (masters go by address):
        # before, the redo's read of the map waited for it until the round's end.
        third = max(cluster.nodes[:3], key=lambda node: node.port)
        tag = next(tag for tag in (f"hot{n}" for n in range(100))
                   if cluster.master_of(key_slot(f"{key_prefix}{{{tag}}}".encode())).port != third.port)
        moving = [f"{{{tag}}}:{i}" for i in range(MOVED)]
        keys = [(key_prefix + name).encode() for name in moving]
        slot = key_slot(keys[0])
        source = cluster.master_of(slot)
        target = next(node for node in cluster.nodes[:3] if node.port not in (source.port, third.port))
        stalling = names_on(cluster, key_prefix, third.port, STALLED, "far")
        lost = LostLocks()
        leases = client.acquire_many(moving + stalling, TTL, auto_renew=True, on_lost=lost).acquired
        acquired_at = time.monotonic()
        assert len(leases) == MOVED + STALLED
        move_slot(cluster, raws, source, target, slot, keys)
        refusing.extend([raws(source), raws(target)])
        for raw in refusing:  # no map to read until REFUSING: the round's first redo fails
            raw.execute_command("ACL", "SETUSER", "default", "-cluster")
        allow = threading.Timer(REFUSING - (time.monotonic() - acquired_at), _allow_cluster, (refusing,))
        allow.start()
        third.pause()  # across the renewal, until the locks' first ttl is well over
        try:
            time.sleep(TTL + 0.5 - (time.monotonic() - acquired_at))
        finally:
            third.resume()
            allow.join()
        moved_lost = sorted(set(lost.names) & set(moving))
        assert moved_lost == [], f"{len(moved_lost)} of {MOVED} locks of the moved slot reported lost"
        assert set(stalling) <= set(lost.names), "a lock of the stalled master was not reported lost"
        assert all(info.held for info in client.query_many(moving)), "an auto-renewed lock expired"
    finally:
        _allow_cluster(refusing)
        fronts.close()


def _allow_cluster(raws: list[redis.Redis]) -> None:
    for raw in raws:
        raw.execute_command("ACL", "SETUSER", "default", "+cluster")
