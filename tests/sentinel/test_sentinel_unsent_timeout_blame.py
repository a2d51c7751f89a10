"""A call whose whole deadline went waiting for a busy pool (every connection lent to other
threads) never reached the master: the Sentinel guard must not blame the master for its
TimeoutError (``UnsentTimeoutError``). It did: the client forgot a healthy master, asked the Sentinels
again and dropped every pooled connection, a reconnect storm under load. Found in review."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from turbolock import TimeoutError
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

from ._helpers import sentinel_checks_off


def test_a_call_that_only_waited_for_a_busy_pool_does_not_forget_the_master(
        sentinel_group: RedisSentinel, make_sentinel_client: Callable[..., SentinelLockClient],
        monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    client = make_sentinel_client(sentinel_group, max_connections=1, timeout=0.3)
    assert not client.query("warm-up").held
    pool = client._pool
    master = pool.routes.master
    assert master is not None
    conn = pool.get(time.monotonic() + 1.0)  # lent to another thread's call
    try:
        with pytest.raises(TimeoutError, match="busy"):
            client.try_acquire("busy", 10)
    finally:
        pool.put(conn)
    assert pool.routes.master == master, "the client forgot a healthy master: nothing was ever sent to it"
    assert pool._idle == [conn] and conn.sock is not None, "the other thread's healthy connection was dropped"
