"""An error reply to one key's SSUBSCRIBE (here MOVED: the key's slot moved to another master)
makes the wake book forget every key whose SSUBSCRIBE was asked in the same batch
(``WakeBook._not_subscribed``), though the server goes on and confirms those: their
confirmations are then ignored, and when their waiters leave, nothing unsubscribes them. The
subscription stays for the connection's life (PUBSUB SHARDNUMSUB stays 1; every release of that
name by anyone counts a listener nobody stands behind). README: subscriptions outlive their
waiters for a second (``IDLE_SECONDS``), then go.

The batch is the one a new subscriber connection sends (``resubscribe``: every key still waited
for, in the order its waiters came): X's waiter came first, and X's slot moved to another master
while it waited (its ticket stays with the old master's subscriber: README "a slot that moves
unsubscribes them: they poll"), Y's waiter next; the old master's subscriber connection is then
lost and made again (found in review). Such a confirmation is now either kept (waiters wait for
the key) or unsubscribed at once. The decision alone: tests/test_wake_book.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from _eventually import eventually
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, finish_slot_move, names_on, other_master, start_slot_move


def _numsub(raw: redis.Redis, channel: bytes) -> int:
    return int(raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1])


@pytest.mark.parametrize("front", FRONTS)
def test_a_moved_reply_does_not_leave_another_keys_subscription_behind(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=2.0)
    try:
        client = fronts.make()
        holder = fronts.make()
        first = cluster.nodes[0]
        x_name, y_name = names_on(cluster, key_prefix, first.port, 2, "leak")
        x_key, y_key = (key_prefix + x_name).encode(), (key_prefix + y_name).encode()
        assert key_slot(x_key) != key_slot(y_key)
        src = raws(first)
        held_x = holder.try_acquire(x_name, 60)
        held_y = holder.try_acquire(y_name, 60)
        assert held_x is not None and held_y is not None
        got: dict[str, bool] = {}

        def wait(name: str) -> None:
            lock = client.lock(name, 60)
            got[name] = lock.acquire(timeout=30)
            if got[name]:
                lock.release()

        waiter_x = threading.Thread(target=wait, args=(x_name,), daemon=True)
        waiter_x.start()
        assert eventually(lambda: _numsub(src, x_key) == 1, 10)
        # X's slot moves to another master while its waiter waits.
        target = other_master(cluster, first)
        dst = raws(target)
        slot = key_slot(x_key)
        dst_id = start_slot_move(src, dst, slot)
        finish_slot_move(src, dst, target, slot, [x_key], dst_id)
        waiter_y = threading.Thread(target=wait, args=(y_name,), daemon=True)
        waiter_y.start()
        assert eventually(lambda: _numsub(src, y_key) == 1, 10)
        # The old master's subscriber connection is lost, then made again: it asks for X, then Y.
        assert src.client_kill_filter(_type="pubsub") >= 1
        time.sleep(1.0)
        assert _numsub(src, y_key) == 1  # Y is subscribed again (X is answered MOVED)
        assert holder.release(held_y)
        waiter_y.join(10)
        assert got.get(y_name) is True
        # Y's only waiter is gone: within a second or so nobody listens for Y any more.
        time.sleep(2.5)
        left = _numsub(src, y_key)
        assert holder.release(held_x)
        waiter_x.join(10)
        assert got.get(x_name) is True
        assert left == 0, "Y's subscription outlived its waiters"
    finally:
        fronts.close()
