"""An auto-renewed lease extended by hand to a short ttl is still renewed: the renewer polls as
often as that ttl's margin needs, as it does for a lease acquired with it (it kept the poll of
the ttl acquired with, and the lock was lost a moment after the extend said True). An extend to
a ttl too short for auto-renewal is refused before anything is sent, as such an acquire is."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from turbolock import InvalidArgumentError, Lease, LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

SHORT = 0.3  # short (a 0.1 s margin) against the first ttls' polls; 0.15, the shortest auto_renew
# takes, lost the lock to a renewer starved 50 ms on a busy CI host
WATCH = 1.2

pytestmark = pytest.mark.timing  # renewals of a 0.15 s ttl: a starved renewer (a busy CI host) loses it


@pytest.mark.parametrize("first_ttl", [SHORT, 1, 60], ids=["acquired-short", "from-1s", "from-60s"])
@pytest.mark.parametrize("bulk", [False, True], ids=["extend", "extend_many"])
def test_extended_to_a_short_ttl_stays_renewed(redis_server: RedisServer, core_name: str, key_prefix: str,
                                               raw: redis.Redis, first_ttl: float, bulk: bool) -> None:
    lost: list[Lease] = []
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("job", first_ttl, auto_renew=True, on_lost=lost.append)
        assert lease is not None
        extended = client.extend_many([lease], SHORT) if bulk else client.extend(lease, SHORT)
        assert extended in (True, [True])
        time.sleep(WATCH)
        assert not lost and not lease.is_lost
        assert 0 < raw.pttl(key_prefix + "job") <= SHORT * 1000
        assert lease.renewal is not None and lease.renewal.renewals >= WATCH / SHORT - 2


def test_asyncio_extended_to_a_short_ttl_stays_renewed(redis_server: RedisServer, key_prefix: str,
                                                       raw: redis.Redis) -> None:
    lost: list[Lease] = []

    async def main() -> None:
        async with AsyncLockClient.from_url(redis_server.url, key_prefix=key_prefix) as client:
            lease = await client.try_acquire("job", 60, auto_renew=True, on_lost=lost.append)
            assert lease is not None
            assert await client.extend(lease, SHORT)
            await asyncio.sleep(WATCH)
            assert not lost and not lease.is_lost
            assert 0 < raw.pttl(key_prefix + "job") <= SHORT * 1000

    asyncio.run(main())


def _calls(raw: redis.Redis) -> dict[str, int]:
    stats = raw.info("commandstats")
    return {name: command["calls"] for name, command in stats.items() if name != "cmdstat_info"}


@pytest.mark.parametrize("bulk", [False, True], ids=["extend", "extend_many"])
def test_an_extend_too_short_for_renewal_is_refused_before_sending(redis_server: RedisServer, core_name: str,
                                                                    key_prefix: str, raw: redis.Redis,
                                                                    bulk: bool) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("job", 60, auto_renew=True)
        plain = client.try_acquire("plain", 60)
        assert lease is not None and plain is not None
        calls = _calls(raw)
        with pytest.raises(InvalidArgumentError) as refused:
            if bulk:
                client.extend_many([plain, lease], 0.1)
            else:
                client.extend(lease, 0.1)
        assert refused.value.argument == "ttl"
        assert _calls(raw) == calls  # nothing was sent
        assert raw.pttl(key_prefix + "job") > 50_000 and not lease.is_lost
        assert client.extend(plain, 0.1)  # a lease not renewed may have any ttl
