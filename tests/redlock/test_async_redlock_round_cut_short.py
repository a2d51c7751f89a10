"""The asyncio Redlock renewer's round cut short (its loop ended: ``asyncio.run`` returned) in the
last moments before its lease's loss must be declared: the lease is renewed or declared lost on
the next loop, as on one server (tests/asyncio/test_async_round_cut_short_near_expiry.py). The
Redlock round dropped it: neither due nor lost, ``wait_lost`` ran to its timeout (found in
review)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = [pytest.mark.timing,  # the loop ends 40 ms before the lease's last chance
              pytest.mark.parametrize("core_name", ["c"], indirect=True)]  # the renewer's rule: no core's own


def test_a_redlock_lease_of_a_round_cut_short_near_its_expiry_is_renewed_or_lost_on_the_next_loop(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)
    client = AsyncRedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                                node_timeout=2)
    leases: list[object] = []

    async def first_loop() -> None:
        lease = await client.try_acquire("job", 3, auto_renew=True)  # renewed ~1 s before expiry
        assert lease is not None
        leases.append(lease)
        await asyncio.sleep(max(0.0, lease.expires_at - 1.6 - time.monotonic()))
        for server in servers:
            server.pause()  # that renewal round gets no reply, and waits until the expiry
        await asyncio.sleep(max(0.0, lease.expires_at - 0.04 - time.monotonic()))
        # the loop ends here: the renewal task is cancelled with its round in flight

    try:
        asyncio.run(first_loop())
    finally:
        for server in servers:
            server.resume()
    lease = leases[0]
    assert lease.valid_for() < 0.2  # type: ignore[attr-defined]

    async def second_loop() -> tuple[bool, float]:
        await client.wait_lost(lease, timeout=1.5)  # type: ignore[arg-type]
        seen = (lease.is_lost, lease.valid_for())  # type: ignore[attr-defined]
        await client.close()
        return seen

    is_lost, valid_for = asyncio.run(second_loop())
    assert is_lost or valid_for > 0, (f"the Redlock lease was neither renewed nor declared lost on the "
                                      f"next loop (valid_for={valid_for})")
