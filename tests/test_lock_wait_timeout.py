"""A blocking acquire that times out makes no attempt once its wait is over. Found in review: on
the threaded client that last attempt, with its deadline already passed, was never sent yet
treated as a lost reply: the pooled connection thrown away (a new TCP connection per timed-out
acquire) and a "maybe held" lock queued for a background release of a token never sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis


def test_a_timed_out_acquire_leaves_no_phantom_cleanup(make_client: Callable[..., Any],
                                                       raw: redis.Redis) -> None:
    client = make_client(wake_waiters=False)
    held = client.try_acquire("held", 30)
    assert held is not None
    assert client.query("held").held  # the pool has its connection
    before = raw.info("stats")["total_connections_received"]
    phantom = 0
    for _ in range(5):
        assert client.lock("held", 5).acquire(timeout=0.2) is False
        phantom = max(phantom, client.pending_cleanup)
    opened = raw.info("stats")["total_connections_received"] - before
    assert client.release(held)
    assert phantom == 0, "a timed-out acquire queued a background release of a lock it never asked for"
    assert opened == 0, f"{opened} connections were thrown away by 5 timed-out acquires"
