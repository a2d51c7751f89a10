"""A threaded bulk release on Redis Cluster interrupted (KeyboardInterrupt) after its first
round, while it sends again the locks a moved slot answered MOVED for: the locks without an
answer are released in the background, and only those. The first round's replies reach the
release item by item, out of input order; taking the last of them for "everything before was
answered" once left the moved locks held to their ttl."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from turbolock._flows import cluster_routes
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import finish_slot_move, other_master, start_slot_move

TTL = 30


def test_an_interrupted_resend_after_moved_releases_the_unanswered(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: Callable[[RedisServer], redis.Redis], monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster)
    tag = "{moving}"
    slot = key_slot(tag.encode())
    moving = [f"{tag}:{i}" for i in range(6)]  # first in the call: answered last, after the move
    others = [f"other:{i}" for i in range(30)]
    leases = client.acquire_many(moving + others, TTL).acquired
    assert len(leases) == 36
    prefix = key_prefix.encode()
    source = cluster.master_of(slot)
    target = other_master(cluster, source)
    src, dst = raws(source), raws(target)
    target_id = start_slot_move(src, dst, slot)
    finish_slot_move(src, dst, target, slot, [prefix + name.encode() for name in moving], target_id)

    share_flow = cluster_routes._share_flow
    interrupts = [1]

    def interrupted(*args: Any, **kwargs: Any) -> Any:  # the second round: one master's share alone
        if interrupts and threading.current_thread() is threading.main_thread():
            interrupts.pop()
            raise KeyboardInterrupt
        return share_flow(*args, **kwargs)  # the background cleanup's calls

    monkeypatch.setattr(cluster_routes, "_share_flow", interrupted)
    with pytest.raises(KeyboardInterrupt):
        client.release_many(leases)
    monkeypatch.undo()

    def held() -> int:
        return sum(raw.dbsize() for raw in (raws(node) for node in cluster.nodes[:cluster.masters]))

    assert eventually(lambda: held() == 0, 5.0), f"{held()} locks left held after the interrupted release"
