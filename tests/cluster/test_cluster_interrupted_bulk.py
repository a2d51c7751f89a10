"""A threaded bulk acquire on Redis Cluster interrupted (KeyboardInterrupt) on the caller's own
master share, while the other masters' shares run on the gather pool: what those took is
released in the background. The control, with nobody to hand it to, leaves it held."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from turbolock._flows.bulk_plan import AcquirePlan
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("control", [False, True], ids=["handed-over", "control"])
def test_the_other_masters_shares_are_released(cluster: RedisCluster, make_cluster_client: Callable[..., Any],
                                               raws: Callable[[RedisServer], redis.Redis],
                                               monkeypatch: pytest.MonkeyPatch, control: bool) -> None:
    encode = AcquirePlan.encode_indices

    def interrupt_on_the_callers_thread(plan: AcquirePlan, buf: Any, indices: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            time.sleep(0.2)  # the other shares are taken meanwhile
            raise KeyboardInterrupt
        encode(plan, buf, indices)

    client: ClusterLockClient = make_cluster_client(cluster)
    assert client.query("warm-up").held is False
    if control:
        client._cluster.on_orphan = None
    monkeypatch.setattr(AcquirePlan, "encode_indices", interrupt_on_the_callers_thread)
    names = [f"sharded:{i}" for i in range(3000)]
    with pytest.raises(KeyboardInterrupt):
        client.acquire_many(names, 30)
    monkeypatch.undo()
    prefix = client.key_prefix

    def left() -> int:
        return sum(len(list(raws(node).scan_iter(match=prefix + b"*", count=1000)))
                   for node in cluster.nodes[:cluster.masters])

    if control:
        time.sleep(1.0)  # what a hand-over would have released by now
        assert 1000 < left() < 3000, "the control must leave the other masters' shares held"
    else:
        assert eventually(lambda: left() == 0, 5.0)
