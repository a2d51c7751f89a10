"""An auto-renewed lock held across ``asyncio.run()`` calls, watched in the next run with
``wait_lost`` alone, is still renewed, or reported lost (README). ``wait_lost`` did not move the
renewer to the running loop (only a call that needs a connection did): the lock expired on the
server unrenewed and ``wait_lost`` returned False ("not lost") at its timeout (found in
review)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from turbolock import Lease
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning")


def run_once(loop_name: str, body):  # type: ignore[no-untyped-def]
    if loop_name == "asyncio":
        return asyncio.run(body())
    import uvloop

    return uvloop.run(body())


def test_wait_lost_in_the_next_run_sees_the_lock_renewed_or_lost(loop_name: str, redis_server: RedisServer,
                                                                 raw: redis.Redis, core_name: str,
                                                                 key_prefix: str) -> None:
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)

    async def take() -> Lease | None:
        return await client.try_acquire("job", ttl=0.6, auto_renew=True)

    lease = run_once(loop_name, take)
    assert lease is not None
    key = key_prefix.encode() + b"job"

    async def watch() -> tuple[bool, bool, float]:
        started = time.monotonic()
        lost = await client.wait_lost(lease, timeout=2)  # about three ttls
        return lost, bool(raw.exists(key)), time.monotonic() - started

    try:
        lost, held, waited = run_once(loop_name, watch)
        assert held or lost, (f"the lock expired unrenewed ({waited:.2f}s) and wait_lost said it was not "
                              f"lost (lease.is_lost={lease.is_lost})")
    finally:
        run_once(loop_name, client.close)
