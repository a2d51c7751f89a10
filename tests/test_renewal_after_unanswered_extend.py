"""An auto-renewed lease whose extend got no reply (the server stopped, or the asyncio task
cancelled once the extend was written) believes the shorter of its two possible expiries, and
the renewer renews it by that belief. It had it due by the longer one: a 10 s lease extended to
1 s without a reply ran past its believed expiry for seconds, neither renewed nor reported lost,
and was then reported lost while the server still held it (found in review)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from turbolock import LockClient, OutcomeUnknownError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = [pytest.mark.timing,  # a renewal due within half a second of a believed expiry
              pytest.mark.parametrize("core_name", ["c"], indirect=True)]  # the renewer's rule: no core's own


def _renewed_in_time(lease: object, raw: redis.Redis, key: bytes) -> str | None:
    """None when the lease, past the 1 s it believed after the extend, is still held and believed
    valid (renewed); else what is wrong."""
    pttl = raw.pttl(key)
    if lease.is_lost or lease.valid_for() <= 0 or pttl <= 0:  # type: ignore[attr-defined]
        return (f"past its believed expiry: lost={lease.is_lost}, valid_for={lease.valid_for():.2f}, "  # type: ignore[attr-defined]
                f"server pttl={pttl} ms")
    return None


@pytest.mark.parametrize("call", ["extend", "extend_many"])
def test_a_renewed_lease_whose_extend_got_no_reply_is_renewed_by_its_new_belief(
        own_server: RedisServer, core_name: str, key_prefix: str, call: str) -> None:
    raw = redis.Redis(host=own_server.host, port=own_server.port)
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.3) as client:
        lease = client.try_acquire("job", 10, auto_renew=True)  # due for renewal at ~6.7 s
        assert lease is not None
        own_server.pause()
        try:
            with pytest.raises(OutcomeUnknownError):
                client.extend(lease, 1) if call == "extend" else client.extend_many([lease], 1)
        finally:
            own_server.resume()
        believed = lease.expires_at
        assert believed - time.monotonic() < 1.0  # it may have run: a 1 s life believed
        time.sleep(max(0.0, believed - time.monotonic()) + 0.3)
        wrong = _renewed_in_time(lease, raw, (key_prefix + "job").encode())
    raw.close()
    assert wrong is None, wrong


def test_a_renewed_lease_whose_asyncio_extend_was_cancelled_is_renewed_by_its_new_belief(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    raw = redis.Redis(host=own_server.host, port=own_server.port)

    async def scenario() -> str | None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix,
                                            timeout=2) as client:
            lease = await client.try_acquire("job", 10, auto_renew=True)
            assert lease is not None
            own_server.pause()
            try:
                extending = asyncio.ensure_future(client.extend(lease, 1))
                await asyncio.sleep(0.2)  # written, no reply
                extending.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await extending
            finally:
                own_server.resume()
            believed = lease.expires_at
            assert believed - time.monotonic() < 1.0
            await asyncio.sleep(max(0.0, believed - time.monotonic()) + 0.3)
            return _renewed_in_time(lease, raw, (key_prefix + "job").encode())

    wrong = asyncio.run(scenario())
    raw.close()
    assert wrong is None, wrong
