"""A bulk call whose one chunk is answered NOSCRIPT (after ``SCRIPT FLUSH`` or a restart) sends
it again after ``SCRIPT LOAD`` within the call's budget (``timeout`` per chunk of ``chunk_size``
commands), as a single call keeps one deadline for the command and its retry (the control).
The retry started a fresh ``timeout`` of its own, so a one-chunk call on a slow link took two
timeouts' worth (found in review; the asyncio single release too). A proxy in front of a real
redis-server delays every reply by 0.7 s, ``timeout=1``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _netfaults import FaultProxy
from turbolock import LockError
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

TIMEOUT = 1.0
DELAY = 0.7
SLACK = 0.2


@pytest.fixture
def slow_proxy(redis_server: RedisServer) -> Iterator[FaultProxy]:
    with FaultProxy(redis_server.host, redis_server.port) as proxy:
        yield proxy


@pytest.mark.parametrize("call", ["release", "release_many", "extend_many", "claim"])
@pytest.mark.parametrize("front", FRONTS)
def test_a_noscript_retry_stays_within_the_chunks_timeout(
        slow_proxy: FaultProxy, redis_server: RedisServer, raw: redis.Redis, core_name: str,
        key_prefix: str, front: str, call: str) -> None:
    fronts = Fronts.at(front, slow_proxy.url, core=core_name, key_prefix=key_prefix, timeout=TIMEOUT,
                       connect_timeout=TIMEOUT)
    try:
        client = fronts.make()
        leases = client.acquire_many(["l1", "l2"], 30).acquired  # the connection is open
        raw.script_flush()
        slow_proxy.delay(DELAY, to_server=False, to_client=True)
        started = time.monotonic()
        raised: BaseException | None = None
        try:
            if call == "release":  # the control: a single call's retry keeps its deadline
                client.release(leases[0])
            elif call == "release_many":
                client.release_many(leases)
            elif call == "extend_many":
                client.extend_many(leases, 30)
            else:
                client.acquire_many(["c1", "c2"], 10, limit=1)
        except LockError as exc:  # the kind depends on the call: what matters is when
            raised = exc
        elapsed = time.monotonic() - started
        slow_proxy.heal()
        assert elapsed <= TIMEOUT + SLACK, f"{call} after SCRIPT FLUSH took {elapsed:.2f}s, budget {TIMEOUT}s"
        assert raised is not None, f"{call} answered after {elapsed:.2f}s, past its budget"
    finally:
        fronts.close()
