"""A Sentinel client's bulk acquire interrupted during WAIT (``replicas_ack``) leaves nothing held."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from _interrupts import acquire_interrupted_in_wait
from turbolock.redis_sentinel import RedisSentinel


def test_a_bulk_acquire_interrupted_in_wait_is_released(
        sentinel_group: RedisSentinel, make_sentinel_client: Callable[..., Any], key_prefix: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_sentinel_client(sentinel_group, replicas_ack=1, replicas_timeout=0.5, timeout=2.0)
    assert client.query("warm-up").held is False
    acquire_interrupted_in_wait(client, [f"s:{i}" for i in range(300)], monkeypatch)
    master = sentinel_group.node_at(sentinel_group.master_port())
    raw = redis.Redis(host=master.host, port=master.port)
    left = sum(1 for _ in raw.scan_iter(match=key_prefix.encode() + b"*", count=1000))
    raw.close()
    assert left == 0, f"{left} locks left held after the interrupt"
