"""A single command whose deadline has passed before anything was written (a blocking acquire's
last attempt cut to what was left of its wait, a resend after a pause) is refused with a
TimeoutError, not reported as maybe held: nothing went out, so nothing can be held, no cleanup
is queued for it, and the connection, which is fine, stays in the pool. (It was reported as
``Unconfirmed``: the connection was closed and a release queued for a token never sent.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from turbolock import LockClient, TimeoutError
from turbolock._wire import scripts as _scripts

CALLS: dict[str, Callable[[Any, bytes, float], object]] = {
    "set_nx": lambda executor, key, deadline: executor.set_nx_one(key, b"t" * 20, 30_000, deadline),
    "fenced": lambda executor, key, deadline: executor.script_one(
        _scripts.FENCED_ACQUIRE, key, b"t" * 20, 30_000, deadline),
    "pttl": lambda executor, key, deadline: executor.pttl_one(key, deadline),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_command_past_its_deadline_is_not_sent_and_keeps_the_connection(
        client: LockClient, raw: redis.Redis, key_prefix: str, call: str) -> None:
    assert not client.query("warm-up").held  # one pooled connection
    pool = client._exec.pool
    (conn,) = pool._idle
    with pytest.raises(TimeoutError, match="before anything was sent"):
        CALLS[call](client._exec, b"late", time.monotonic() - 0.001)
    assert pool._idle == [conn] and not conn.broken and conn.sock is not None
    assert raw.exists(key_prefix + "late") == 0
    assert client.try_acquire("late", 30) is not None  # on that same connection
    assert pool._idle == [conn]
