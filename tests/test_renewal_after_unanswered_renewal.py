"""A renewal that got no reply (the server paused) may still run at any time, setting its own
ttl: every later success believes at most its send time plus that ttl (``lease._ghost``). A lock
then extended by hand to a longer ttl believed that short life after every renewal, less than
its new margin: it was due again at once, renewed at every wake-up of the renewer (about 20
times a second, for ever), and a ``max_renewals`` budget was spent in a fraction of a second,
ending in ``on_lost`` while the server held the lock for 25 s more. It is now renewed at the pace
of the short ttl, each renewal setting the long one again. Found in review."""

from __future__ import annotations

import time

import pytest
import redis

from turbolock import AutoRenew, Lease, LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # a pause of the server of half a second, renewals within a ttl of 3 s


def _with_one_unanswered_renewal(server: RedisServer, client: LockClient,
                                 **terms: object) -> tuple[Lease, list[Lease]]:
    lost: list[Lease] = []
    lease = client.try_acquire("job", 3, auto_renew=AutoRenew(**terms), on_lost=lost.append)  # renewed at 2 s
    assert lease is not None
    time.sleep(1.9)
    server.pause()  # the renewal at about 2 s times out (timeout=0.2), and is retried once the server is back
    time.sleep(0.5)
    server.resume()
    time.sleep(0.5)
    assert not lease.is_lost and lease.renewal is not None and lease.renewal.renewals == 1
    assert lease._ghost is not None  # the premise: the unanswered renewal haunts the lease
    return lease, lost


def test_a_lock_extended_after_an_unanswered_renewal_is_not_renewed_at_every_wake_up(
        own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(host=own_server.host, port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, timeout=0.2) as client:
        lease, lost = _with_one_unanswered_renewal(own_server, client)
        assert client.extend(lease, 30) is True
        assert lease.renewal is not None
        before = lease.renewal.renewals
        time.sleep(1.0)
        assert lease.renewal.renewals - before <= 1, "renewed at every wake-up"
        time.sleep(3.0)
        assert 1 <= lease.renewal.renewals - before <= 4  # at the pace of the 3 s ttl: every 2 s
        assert raw.pttl(client.key_prefix + b"job") > 25_000  # each renewal set the 30 s again
        assert lost == [] and not lease.is_lost and lease.valid_for() > 0.5
    raw.close()


def test_max_renewals_is_not_spent_at_once(own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(host=own_server.host, port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, timeout=0.2) as client:
        lease, lost = _with_one_unanswered_renewal(own_server, client, max_renewals=5)
        assert client.extend(lease, 30) is True
        time.sleep(3.5)
        assert raw.pttl(client.key_prefix + b"job") > 20_000
        assert lost == [], "on_lost called for a lock the server still holds"
        assert lease.renewal is not None and lease.renewal.renewals <= 3
    raw.close()
