"""An asyncio bulk acquire through Sentinel cancelled after some of its chunks were answered:
every lock they took must be released in the background (a cancelled task holds nothing). The
Sentinel's executor runs the call without seeing its chunks as they come; their replies sat in
the executor's own list and were dropped, the locks held for their ttl (found in review), when
the cancel came during a durable call's WAIT (every SET answered) or between chunks. The
one-server client, which sees each chunk as it comes, is the control. Redis Cluster's shares:
tests/cluster/test_async_cluster_cancelled_durable_bulk.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _cancelling import cancelled_bulk_leaves_nothing
from turbolock.asyncio import AsyncLockClient, AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel


def _make(front: str, group: RedisSentinel, options: dict[str, Any]) -> Callable[[], Any]:
    if front == "sentinel":
        return lambda: AsyncSentinelLockClient(group.sentinel_urls, group.service, **options)
    return lambda: AsyncLockClient.from_url(group.node_at(group.master_port()).url, **options)


@pytest.mark.parametrize("front", ["one-server", "sentinel"])
def test_cancelled_in_wait_releases_every_lock(sentinel_group: RedisSentinel, core_name: str,
                                               key_prefix: str, front: str) -> None:
    """Durable (``replicas_ack``), the replica stopped: every SET answered, the WAIT pending."""
    options = {"core": core_name, "key_prefix": key_prefix, "timeout": 5.0, "chunk_size": 3,
               "replicas_ack": 1, "replicas_timeout": 2.0}
    master = sentinel_group.node_at(sentinel_group.master_port())
    replica = next(node for node in sentinel_group.servers if node.port != master.port)
    names = [f"d:{i}" for i in range(10)]
    left = cancelled_bulk_leaves_nothing(_make(front, sentinel_group, options), names, master, key_prefix,
                                         replica.pause, replica.resume)
    assert left == 0, f"{left} of {len(names)} locks left held after the cancelled call"


@pytest.mark.parametrize("front", ["one-server", "sentinel"])
def test_cancelled_between_chunks_releases_the_answered_ones(sentinel_group: RedisSentinel, core_name: str,
                                                             key_prefix: str, front: str) -> None:
    """Many chunks; the master holds writes back (``CLIENT PAUSE WRITE``) once some are in."""
    master = sentinel_group.node_at(sentinel_group.master_port())
    names = [f"c:{i}" for i in range(100_000)]
    options = {"core": core_name, "key_prefix": key_prefix, "timeout": 5.0, "chunk_size": 500}
    pauser = redis.Redis(host=master.host, port=master.port)

    def pause_once_some_are_in() -> None:
        some = (key_prefix + names[2_000]).encode()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not pauser.exists(some):
            time.sleep(0.001)
        pauser.execute_command("CLIENT", "PAUSE", 3000, "WRITE")

    watcher = threading.Thread(target=pause_once_some_are_in, daemon=True)

    def unpause() -> None:
        watcher.join()
        pauser.execute_command("CLIENT", "UNPAUSE")

    try:
        left = cancelled_bulk_leaves_nothing(_make(front, sentinel_group, options), names, master, key_prefix,
                                             watcher.start, unpause)
    finally:
        pauser.close()
    assert left == 0, f"{left} of {len(names)} locks left held after the cancelled call"
