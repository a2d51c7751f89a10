"""``acquire_many(..., auto_renew=True)`` whose connection fails mid-batch raises
``AcquireOutcomeUnknownError`` with the leases whose replies did arrive in ``acquired``: they
are held, and renewed as the call asked (they were handed over unrenewed, and expired with no
loss signalled). The server is paused as the batch's fourth chunk is encoded, so the first ones
are answered and the rest are not."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _lost_locks import LostLocks
from turbolock import AcquireOutcomeUnknownError
from turbolock._flows.bulk_plan import AcquirePlan
from turbolock.redis_server import RedisServer

TTL = 1.0
NAMES = [f"seat:{i}" for i in range(6000)]
pytestmark = pytest.mark.timing  # renewals of 1 s locks, counted on


def _pausing(server: RedisServer, original: Callable[..., None]) -> Callable[..., None]:
    def encode(plan: AcquirePlan, buf: Any, start: int, stop: int) -> None:
        if start == 3000:
            server.pause()
        original(plan, buf, start, stop)
    return encode


@pytest.mark.parametrize("front", FRONTS)
def test_leases_handed_over_by_a_failed_renewed_bulk_acquire_are_renewed(
        own_server: RedisServer, core_name: str, key_prefix: str, front: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    fronts = Fronts.at(front, own_server.url, core=core_name,
                    key_prefix=key_prefix, timeout=0.3, connect_timeout=0.3)
    lost = LostLocks()
    raw = redis.Redis(port=own_server.port)
    try:
        client = fronts.make(chunk_size=1000)
        client.query("warm-up")
        monkeypatch.setattr(AcquirePlan, "encode", _pausing(own_server, AcquirePlan.encode))
        try:
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.acquire_many(NAMES, TTL, auto_renew=True, on_lost=lost)
        finally:
            own_server.resume()
        monkeypatch.undo()
        leases = caught.value.acquired
        assert len(leases) >= 2000, "the chunks before the pause were answered"
        assert all(lease.auto_renew for lease in leases)
        time.sleep(TTL * 2)
        assert lost.names == []
        assert all(not lease.is_lost and lease.valid_for() > 0 for lease in leases)
        assert all(raw.get(key_prefix + str(lease.name)) == lease.token for lease in leases)
        assert client.release_many(leases) == [True] * len(leases)
    finally:
        own_server.resume()
        fronts.close()
        raw.close()
