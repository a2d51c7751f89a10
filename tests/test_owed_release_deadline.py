"""A Lock given a token first makes the release its client owes with it (``owed_release_flow``);
with the server stopped, that release and the attempt after it together end by the wait's
deadline, on both fronts (the asyncio release was bounded by the call timeout alone, so a short
wait could run a whole timeout past its end)."""

from __future__ import annotations

import os
import time

import pytest

from _blocking_async import FRONTS, Fronts
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # elapsed time against the wait

CALL_TIMEOUT = 2.0
WAIT = 0.4
SLACK = 0.35


@pytest.mark.parametrize("front", FRONTS)
def test_a_wait_with_a_release_owed_ends_by_its_deadline_on_a_stopped_server(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    token = os.urandom(16)
    fronts = Fronts.at(front, own_server.url, core=core_name, key_prefix=key_prefix, timeout=CALL_TIMEOUT,
                       wake_waiters=False)
    try:
        client = fronts.make()
        assert client.query("warm-up").held is False
        target = getattr(client, "_target", client)
        # A release owed with the Lock's token, as an earlier attempt whose reply was lost leaves.
        target._cleanup.remember(b"job", token, time.monotonic() + 30)
        lock = client.lock("job", 20, token=token)
        own_server.pause()
        try:
            started = time.monotonic()
            try:
                outcome: object = lock.acquire(timeout=WAIT)
            except Exception as exc:  # a typed error is fine too, in time
                outcome = exc
            elapsed = time.monotonic() - started
        finally:
            own_server.resume()
        assert outcome is False or isinstance(outcome, Exception), outcome
        assert elapsed < WAIT + SLACK, f"the wait of {WAIT}s took {elapsed:.2f}s ({outcome!r})"
    finally:
        own_server.resume()
        fronts.close()
