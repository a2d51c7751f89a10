"""A fenced acquire while its slot moves must not draw a fence from a fresh counter on the
importing node: the counter is a key of the script's (declared), so a node that has only one of
the lock key and the counter answers TRYAGAIN, the client backs off, and once the slot has moved
the next fence is the old counter's next. (With the counter undeclared, the source answered ASK
for the free lock key, the target ran the script under ASKING and INCR made a new counter there:
fence 1 after fences 1..3.) When the counter has moved already and the lock key is on neither
node, the source answers ASK and the target TRYAGAIN: the client pauses and asks again.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, finish_slot_move, other_master, start_slot_move

TTL = 30
MOVE_AFTER = 0.4


@pytest.mark.parametrize("counter_moved", [False, True], ids=["counter-on-source", "counter-moved"])
@pytest.mark.parametrize("op", ["one", "many"])
@pytest.mark.parametrize("front", FRONTS)
def test_a_fence_drawn_while_its_slot_moves_still_grows(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str, op: str, counter_moved: bool) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=5.0)
    try:
        client = fronts.make()
        name = "{fenced-move}:x"
        key = (key_prefix + name).encode()
        counter = key + b":fence"
        slot = key_slot(key)
        fences = []
        for _ in range(3):
            lease = client.try_acquire(name, TTL, fenced=True)
            assert lease is not None
            fences.append(lease.fence)
            assert client.release(lease)
        assert fences == list(range(fences[0], fences[0] + 3))
        source = cluster.master_of(slot)
        target = other_master(cluster, source)
        src, dst = raws(source), raws(target)
        assert src.get(counter) == b"%d" % fences[-1] and src.exists(key) == 0
        target_id = start_slot_move(src, dst, slot)
        if counter_moved:
            src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", counter)
        # The lock key is on neither node: the slot is finished a little after the acquire
        # starts, as a reshard would.
        left = [] if counter_moved else [counter]
        mover = threading.Timer(MOVE_AFTER, finish_slot_move, (src, dst, target, slot, left, target_id))
        mover.start()
        started = time.monotonic()
        try:
            if op == "one":
                lease = client.try_acquire(name, TTL, fenced=True)
            else:
                result = client.acquire_many([name], TTL, fenced=True)
                assert result.all_acquired, result
                lease = result.acquired[0]
        finally:
            mover.join()
        took = time.monotonic() - started
        assert lease is not None and lease.fence == fences[-1] + 1, (
            f"fence {getattr(lease, 'fence', None)} after {fences[-1]}: drawn from another counter")
        assert dst.get(counter) == b"%d" % lease.fence and dst.exists(key) == 1
        assert took < 5.0
        assert client.release(lease)
    finally:
        fronts.close()
