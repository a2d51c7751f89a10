"""Threads: opening a connection is part of a bulk call's first chunk's ``timeout``, as it is for
the blocking client's single calls and for every asyncio call (tests/deadlines/
test_async_connect_in_deadline.py). A proxy in front of a real redis-server delays every reply
by 0.7 s; with ``timeout=1`` the handshake takes 0.7 s and the one chunk another 0.7 s. The
blocking bulk calls started a fresh ``timeout`` once the connection was open and answered after
about 1.4 s, past the README's budget for a one-chunk bulk call (found in review)."""

from __future__ import annotations

import time

import pytest

from _netfaults import FaultProxy
from turbolock import LockClient, LockError
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

TIMEOUT = 1.0
SLACK = 0.2


@pytest.mark.parametrize("call", ["try_acquire", "acquire_many", "claim", "query_many", "release_many",
                                  "extend_many"])
def test_the_blocking_bulk_calls_count_the_connect_in_their_timeout(
        late_replies: FaultProxy, redis_server: RedisServer, core_name: str, key_prefix: str,
        call: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as direct:
        # The scripts loaded beforehand: no NOSCRIPT round trip in what is measured.
        loaded = direct.acquire_many(["s1"], 30, limit=1).acquired
        direct.extend_many(loaded, 30)
        direct.release_many(loaded)
        leases = direct.acquire_many(["l1", "l2"], 30).acquired
        tokens = [lease.token for lease in leases]
    client = LockClient.from_url(late_replies.url, timeout=TIMEOUT, connect_timeout=TIMEOUT,
                                 core=core_name, key_prefix=key_prefix)
    adopted = [client.lease("l1", tokens[0]), client.lease("l2", tokens[1])]
    started = time.monotonic()
    raised: BaseException | None = None
    try:
        if call == "try_acquire":  # the control: a single call counts its connect
            client.try_acquire("a", 10)
        elif call == "acquire_many":
            client.acquire_many(["m1", "m2"], 10)
        elif call == "claim":
            client.acquire_many(["c1", "c2"], 10, limit=1)
        elif call == "query_many":
            client.query_many(["q1", "q2"])
        elif call == "release_many":
            client.release_many(adopted)
        else:
            client.extend_many(adopted, 10)
    except LockError as exc:  # the kind depends on the call: what matters is when
        raised = exc
    elapsed = time.monotonic() - started
    late_replies.heal()
    client.close()
    assert elapsed <= TIMEOUT + SLACK, f"{call} on a new connection took {elapsed:.2f}s, budget {TIMEOUT}s"
    assert raised is not None, f"{call} answered after {elapsed:.2f}s, past its budget"
