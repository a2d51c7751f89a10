"""Many renewed leases lost at once (10,000 of one bulk acquire, the server paused past their
ttl) are each signalled by their expiry: every lease of the round's unanswered batches is marked
lost first, then each ``on_lost`` runs, and the round ends sooner the more leases it holds. They
were signalled one at a time, batch by batch, each with its own log line, from a fixed 25 ms
before the earliest expiry: most came after their own (found in review: 17,407 of 20,000 late,
up to 54 ms)."""

from __future__ import annotations

import logging
import time

import pytest

from turbolock import Lease, LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

TTL = 1.0
LEASES = 10_000


def test_every_lost_lease_is_signalled_by_its_expiry(own_server: RedisServer, core_name: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    late: list[float] = []

    def on_lost(lease: Lease) -> None:  # as cheap as a callback gets
        late.append(time.monotonic() - lease.expires_at)

    with caplog.at_level(logging.WARNING, logger="turbolock"), \
            LockClient.from_url(own_server.url, core=core_name, timeout=5) as client:
        result = client.acquire_many([f"shard-{i}" for i in range(LEASES)], TTL, auto_renew=True,
                                     on_lost=on_lost)
        assert len(result.acquired) == LEASES
        time.sleep(0.3)
        own_server.pause()  # longer than the ttl: every lease must be reported lost, in time
        try:
            time.sleep(TTL * 1.5)
        finally:
            own_server.resume()
        time.sleep(0.3)
    assert len(late) == LEASES
    after = sorted(x for x in late if x > 0)
    assert not after, (f"{len(after)} of {LEASES} leases signalled lost after their expiry, "
                       f"up to {after[-1] * 1000:.1f} ms late")
    lines = [record for record in caplog.records if "lost" in record.getMessage()]
    assert 1 <= len(lines) <= 3, f"{len(lines)} log lines for one loss of {LEASES} locks"
