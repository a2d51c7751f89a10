"""A blocking acquire of a Lock object whose script declares its own keys (fenced=True,
fair=True) meets TRYAGAIN for as long as a free lock's slot is moving. A wait of 10 s, or one
with no end, over a move that takes 1.6 s ends with the lock, as a plain Lock's does: each
attempt still refused at its call deadline (1 s) fails with ``SlotMovingError``, which a
blocking acquire waits on through like a held lock. (A ResponseError ended the wait after a
second; then a TimeoutError ended an endless one: both found in review.)"""

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

MOVE_TAKES = 1.6
"""Longer than an attempt's call deadline (1 s): one attempt is refused until it."""

_moved: set[int] = set()
"""The slots this module's tests moved: each test moves a slot of its own, whose master the
cluster's every node agrees on (a move tells its two nodes; the third hears later)."""


def _unmoved_name(prefix: str) -> str:
    """A lock name whose keys (one slot: a hash tag) no test here has moved yet."""
    for i in range(100_000):
        name = f"{{wait-move-{i}}}:x"
        slot = key_slot((prefix + name).encode())
        if slot not in _moved:
            _moved.add(slot)
            return name
    raise AssertionError("no slot left")


@pytest.mark.parametrize(("kind", "wait"), [
    ("plain", 10), ("fenced", 10), ("fair", 10), ("fair-fenced", 10), ("fenced", None), ("fair", None),
], ids=["plain", "fenced", "fair", "fair-fenced", "fenced-endless", "fair-endless"])
@pytest.mark.parametrize("front", FRONTS)
def test_a_blocking_acquire_waits_through_a_slot_move(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str, kind: str, wait: float | None) -> None:
    cluster = quiet_cluster
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=1.0)
    try:
        client = fronts.make()
        name = _unmoved_name(key_prefix)
        key = (key_prefix + name).encode()
        slot = key_slot(key)
        fenced = "fenced" in kind
        fair = kind.startswith("fair")
        # The counter (and, for a fair lock, nothing else: its queue is gone once taken) exists.
        first = client.lock(name, 30, fenced=fenced, fair=fair)
        assert first.acquire(timeout=5)
        first.release()
        source = cluster.master_of(slot)
        target = other_master(cluster, source)
        src, dst = raws(source), raws(target)
        left = list(src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100))
        target_id = start_slot_move(src, dst, slot)
        mover = threading.Timer(MOVE_TAKES, finish_slot_move, (src, dst, target, slot, left, target_id))
        mover.start()
        started = time.monotonic()
        lock = client.lock(name, 30, fenced=fenced, fair=fair)
        try:
            try:
                got = lock.acquire() if wait is None else lock.acquire(timeout=wait)
            except Exception as exc:
                got = exc
            took = time.monotonic() - started
        finally:
            mover.join()
        assert got is True, f"{kind}: a 10 s wait over a {MOVE_TAKES} s move gave {got!r} after {took:.2f} s"
        assert took < 10
        if kind != "plain":  # (a plain SET NX is served by the importing node after ASK)
            assert took > MOVE_TAKES - 0.1, f"{kind}: taken {took:.2f} s into a {MOVE_TAKES} s move"
        lock.release()
    finally:
        fronts.close()
