"""Redlock auto-renewal: renewed on a majority through the renewal wheel; a lost lock is always
signalled (event, callback, ensure_held); limits stop renewing."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from _raw import Raws
from turbolock import AutoRenew, Lease, LockLostError, RedlockClient, RedlockStatus
from turbolock.redis_server import RedisServer

from ._helpers import values, wait_for

MakeRedlock = Callable[..., RedlockClient]

TTL = 0.5  # renewed a third of the ttl (167 ms) before expiry


def test_a_renewed_redlock_outlives_its_ttl(three: list[RedisServer], make_redlock: MakeRedlock, raws: Raws,
                                            key_prefix: str) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("long", TTL, auto_renew=True)
    assert lease is not None and lease.auto_renew and client.renewing == 1
    time.sleep(TTL * 3)
    assert lease.extensions >= 3 and lease.valid_for() > 0 and not lease.is_lost
    assert values(raws(three), key_prefix + "long") == [lease.token] * 3
    assert client.release(lease) and client.renewing == 0
    assert values(raws(three), key_prefix + "long") == [None] * 3


def test_a_redlock_taken_on_a_majority_is_reported_lost(three: list[RedisServer], make_redlock: MakeRedlock,
                                                        raws: Raws, key_prefix: str) -> None:
    client = make_redlock(three)
    lost: list[Lease] = []
    stolen = client.try_acquire("stolen", TTL, auto_renew=True, on_lost=lost.append)
    minority = client.try_acquire("minority", TTL, auto_renew=True, on_lost=lost.append)
    assert stolen is not None and minority is not None
    connections = raws(three)
    for raw in connections[:2]:
        raw.set(key_prefix + "stolen", b"thief", px=60_000)
    connections[0].set(key_prefix + "minority", b"thief", px=60_000)
    assert stolen.lost.wait(TTL)
    assert wait_for(lambda: lost == [stolen], 1.0)  # the callback runs just after the event is set
    assert stolen.status is RedlockStatus.EXPIRED
    with pytest.raises(LockLostError, match="no longer held on a majority"):
        stolen.ensure_held()
    time.sleep(TTL)
    assert not minority.is_lost and minority.extensions >= 1  # a majority still renews it
    assert client.renewing == 1
    assert client.release(minority)


def test_max_extensions_stops_renewal_and_the_lock_then_expires(three: list[RedisServer],
                                                                make_redlock: MakeRedlock) -> None:
    client = make_redlock(three, retry_count=None, retry_delay=0.01)
    lease = client.try_acquire("limited", TTL, auto_renew=True, max_extensions=2)
    assert lease is not None
    assert lease.lost.wait(TTL * 4)
    assert lease.extensions == 2 and "limit" in (lease.lost_reason or "")
    # Reported lost at the end of its validity, a little before the masters expire the key.
    assert client.acquire("limited", TTL, timeout=1.0).status is RedlockStatus.ACQUIRED


def test_auto_renew_works_with_a_margin_shorter_than_the_node_timeout(three: list[RedisServer],
                                                                       make_redlock: MakeRedlock) -> None:
    # A renewal round waits for the masters no longer than the lease's validity, not a whole
    # node timeout, so a margin shorter than node_timeout still renews while masters answer.
    client = make_redlock(three, node_timeout=0.3)
    renewed = client.try_acquire("y", TTL, auto_renew=True)  # renews TTL/3 before expiry, < 0.3 s
    assert renewed is not None
    time.sleep(TTL * 2.5)
    renewed.ensure_held()
    assert renewed.renewal is not None and renewed.renewal.renewals >= 2
    assert client.release(renewed)
    with pytest.raises(ValueError, match="renew_before"):
        client.try_acquire("x", TTL, auto_renew=AutoRenew(renew_before=0.01))
    lease = client.try_acquire("x", TTL, auto_renew=AutoRenew(renew_before=0.35, max_renewals=1))
    assert lease is not None and client.release(lease)


def test_close_releases_renewed_redlocks(three: list[RedisServer], make_redlock: MakeRedlock, raws: Raws,
                                         key_prefix: str) -> None:
    client = make_redlock(three)
    result = client.acquire_many([f"r:{i}" for i in range(20)], TTL, auto_renew=True)
    assert len(result.acquired) == 20 and client.renewing == 20
    client.close()
    keys = [f"{key_prefix}r:{i}" for i in range(20)]
    connections = raws(three)
    assert wait_for(lambda: not any(raw.exists(*keys) for raw in connections), 1.0)
