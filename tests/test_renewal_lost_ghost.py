"""A renewal whose reply was lost (a SIGSTOPped server) may still run once the server resumes.
When the renewer has meanwhile reported the lease lost, that late renewal would leave the key
held with our token for a whole new ttl: the renewer releases such a lease in the background
as it reports it lost. (It once did not: reported lost, yet held by us.)"""

from __future__ import annotations

import time

import pytest
import redis

from _eventually import eventually
from _lost_locks import LostLocks
from turbolock import LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # 1 s ttls renewed on time: scripts/test runs these on their own

TTL = 1.0
T = 0.15


def test_a_lease_reported_lost_is_not_left_held_by_a_late_renewal(own_server: RedisServer, core_name: str,
                                                                   key_prefix: str) -> None:
    raw = redis.Redis(host=own_server.host, port=own_server.port)
    lost = LostLocks()
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                             connect_timeout=T) as client:
        lease = client.try_acquire("ghost", TTL, auto_renew=True, on_lost=lost)
        assert lease is not None
        key = client.key_prefix + b"ghost"
        time.sleep(0.8)  # after the first renewal: the renewer has its connection
        own_server.pause()
        try:
            assert lease.lost.wait(TTL * 2), "never reported lost"
        finally:
            own_server.resume()
        reported_at = time.monotonic()
        # lease.lost is set before on_lost runs, on the renewer's thread: give the callback its turn.
        assert eventually(lambda: lost.names == ["ghost"], 1.0), f"on_lost saw {lost.names}"
        time.sleep(0.3)
        token, pttl = raw.get(key), raw.pttl(key)
        assert token != lease.token, (
            f"reported lost at {reported_at:.3f}, yet {time.monotonic() - reported_at:.2f}s later the key "
            f"still holds our token with pttl {pttl}ms (a renewal sent before the loss ran on resume, "
            f"and nothing releases it)")
    raw.close()
