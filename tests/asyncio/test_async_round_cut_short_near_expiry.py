"""A renewal round cut short (its loop ended: ``asyncio.run`` returned) in the last moments
before its leases' loss must be declared: those leases are due at once, for the renewer on the
next loop that uses the client to renew them (still held: the server ran the renewal it had
buffered) or declare them lost. The cancelled round dropped them, neither due on the wheel nor
lost: on the next loop the lease stayed with ``valid_for()`` 0, not lost, not renewed, and the
client still counted it as renewed (found in review)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from turbolock import Lease
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = [pytest.mark.timing,  # the loop ends 40 ms before the lease's last chance
              pytest.mark.parametrize("core_name", ["c"], indirect=True)]  # the renewer's rule: no core's own


def test_a_lease_of_a_round_cut_short_near_its_expiry_is_renewed_or_lost_on_the_next_loop(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=5)
    leases: list[Lease] = []

    async def first_loop() -> None:
        lease = await client.try_acquire("job", 1, auto_renew=True)  # renewed at ~0.67 s
        assert lease is not None
        leases.append(lease)
        await asyncio.sleep(0.4)
        own_server.pause()  # that renewal gets no reply
        await asyncio.sleep(max(0.0, lease.expires_at - 0.04 - time.monotonic()))
        # the loop ends here: the renewal task is cancelled with its round in flight

    try:
        asyncio.run(first_loop())
    finally:
        own_server.resume()
    lease = leases[0]
    assert lease.valid_for() < 0.2

    async def second_loop() -> tuple[bool, float]:
        await client.wait_lost(lease, timeout=1.5)
        seen = (lease.is_lost, lease.valid_for())
        await client.close()
        return seen

    raw = redis.Redis(host=own_server.host, port=own_server.port)
    try:
        held_for = raw.pttl(key_prefix + "job")
        is_lost, valid_for = asyncio.run(second_loop())
    finally:
        raw.close()
    assert is_lost or valid_for > 0, (f"the lease was neither renewed nor declared lost on the next loop "
                                      f"(valid_for={valid_for}, the server held it {held_for} ms more)")
