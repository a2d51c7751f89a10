"""A slot whose move was abandoned (``redis-cli --cluster reshard`` killed after ``SETSLOT
MIGRATING/IMPORTING``: ``--cluster check`` reports an open slot) answers a fenced acquire of a
free lock TRYAGAIN until an operator fixes it. A blocking wait with no end goes on through a
moving slot as through a held lock, but only for ``SLOT_MOVE_PATIENCE``: then it ends with the
``SlotMovingError`` instead of hanging silently (found in review). The patience is made short
here; the slot is closed (SETSLOT STABLE) by the test either way."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from _in_thread import InThread
from turbolock._flows import lock_rules
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.errors import SlotMovingError
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import other_master, start_slot_move

T = 1.0
PATIENCE = 2.5


def test_an_endless_fenced_wait_on_an_abandoned_slot_move_ends_after_its_patience(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock_rules, "SLOT_MOVE_PATIENCE", PATIENCE)
    cluster = own_cluster(masters=3, replicas=0)
    client = ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=T)
    try:
        name = "{abandoned}:x"
        slot = key_slot((key_prefix + name).encode())
        first = client.lock(name, 30, fenced=True)
        assert first.acquire(timeout=5)
        first.release()  # the fence counter exists, the lock key does not
        source = cluster.master_of(slot)
        src, dst = raws(source), raws(other_master(cluster, source))
        start_slot_move(src, dst, slot)  # ... and the reshard dies here
        lock = client.lock(name, 30, fenced=True)
        started = time.monotonic()
        waiter = InThread(lock.acquire)  # blocking, no timeout
        waiter.join(PATIENCE + 3 * T + 2)
        took = time.monotonic() - started
        ended = not waiter.is_alive()
        for node in (src, dst):  # let a waiter still there go
            node.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
        outcome = waiter.join(10)
        if outcome is True:
            lock.release()
        assert ended, f"the endless wait had not ended {took:.1f} s into an abandoned move: {outcome!r}"
        assert isinstance(outcome, SlotMovingError), outcome
        assert PATIENCE <= took, f"gave up after {took:.1f} s, before its patience"
    finally:
        client.close()
