"""A Lock wait on a Sentinel client that times out with the master healthy: its last attempt,
cut to what was left of the wait, is not taken for a master failure (the client keeps its
master and connections); a fair one leaves the queue in the background."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from turbolock.redis_sentinel import RedisSentinel


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_wait_that_times_out_keeps_the_master(
        sentinel_group: RedisSentinel, make_sentinel_client: Callable[..., Any], key_prefix: str,
        monkeypatch: pytest.MonkeyPatch, fair: bool) -> None:
    client = make_sentinel_client(sentinel_group)
    holder = client.lock("sl", 10, fair=fair)
    assert holder.acquire()
    forgotten: list[int] = []
    real = type(client._pool).master_failed

    def master_failed(pool: Any) -> None:
        forgotten.append(1)
        real(pool)

    monkeypatch.setattr(type(client._pool), "master_failed", master_failed)
    assert not client.lock("sl", 10, fair=fair).acquire(timeout=0.1)
    master = sentinel_group.node_at(sentinel_group.master_port())
    raw = redis.Redis(host=master.host, port=master.port)
    try:
        queue = b"{" + key_prefix.encode() + b"sl}:queue"
        assert eventually(lambda: raw.zcard(queue) == 0, 5.0)
    finally:
        raw.close()
    assert forgotten == []
    holder.release()
