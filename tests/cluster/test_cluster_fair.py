"""Fair Lock objects on Redis Cluster (threads and asyncio): a name's queue lives on the master
of the lock's slot (a plain name, and one with a hash tag), and its waiters are served in their
order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("name", ["acct:7", "{shard:1}:a"])
def test_a_names_queue_lives_beside_its_lock_and_serves_in_order(
        cluster: RedisCluster, make_client: Callable[..., Any], key_prefix: str, name: str,
        raws: Callable[[RedisServer], redis.Redis]) -> None:
    client = make_client()
    key = (key_prefix + name).encode()
    queue = (key if name.startswith("{") else b"{" + key + b"}") + b":queue"
    assert key_slot(queue) == key_slot(key)
    owner = raws(cluster.master_of(key_slot(key)))
    holder = client.lock(name, 10, fair=True)
    assert holder.acquire()
    got: list[int] = []

    def wait(i: int) -> None:
        lock = client.lock(name, 10, fair=True)
        assert lock.acquire(timeout=10)
        got.append(i)
        lock.release()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(4)]
    for i, thread in enumerate(threads):
        thread.start()
        assert eventually(lambda i=i: owner.zcard(queue) == i + 1, 10.0)
    holder.release()
    for thread in threads:
        thread.join(10)
    assert got == [0, 1, 2, 3]
    assert owner.zcard(queue) == 0
