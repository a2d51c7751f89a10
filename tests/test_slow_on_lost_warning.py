"""An ``on_lost`` callback runs on the renewer (its thread; an asyncio client's loop), and no lock
of the client is renewed while it runs: a slow one let a healthy lock of the same client expire
unrenewed, silently (found in review). The README says to keep it short; one that runs longer
than ``SLOW_ON_LOST`` is named in a warning, so the cause of the other losses can be found."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import redis

from _eventually import eventually
from turbolock import LockClient
from turbolock._flows.renewal_round import SLOW_ON_LOST
from turbolock.asyncio import AsyncLockClient
from turbolock.lease import Lease
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

PAUSE = SLOW_ON_LOST * 3


def _warned(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records
            if record.levelno == logging.WARNING and "on_lost callback" in record.getMessage()
            and repr(name) in record.getMessage()]


@pytest.mark.parametrize("slow", [True, False], ids=["slow", "quick"])
def test_threads(redis_server: RedisServer, raw: redis.Redis, core_name: str, key_prefix: str,
                 caplog: pytest.LogCaptureFixture, slow: bool) -> None:
    called: list[str] = []

    def on_lost(lease: Lease) -> None:
        called.append(str(lease.name))
        if slow:
            time.sleep(PAUSE)

    caplog.set_level(logging.WARNING, logger="turbolock.renewal")
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("slow-callback", 0.3, auto_renew=True, on_lost=on_lost)
        assert lease is not None
        raw.delete(key_prefix + "slow-callback")  # the next renewal finds it gone
        assert eventually(lambda: called, 3)
        time.sleep(PAUSE + 0.1)
    assert bool(_warned(caplog, "slow-callback")) is slow


def test_asyncio(redis_server: RedisServer, raw: redis.Redis, core_name: str, key_prefix: str,
                 caplog: pytest.LogCaptureFixture) -> None:
    called: list[str] = []

    def on_lost(lease: Lease) -> None:
        called.append(str(lease.name))
        time.sleep(PAUSE)  # blocks the loop, as a slow synchronous callback does

    caplog.set_level(logging.WARNING, logger="turbolock.renewal")

    async def main() -> None:
        async with AsyncLockClient.from_url(redis_server.url, core=core_name,
                                            key_prefix=key_prefix) as client:
            lease = await client.try_acquire("slow-callback", 0.3, auto_renew=True, on_lost=on_lost)
            assert lease is not None
            raw.delete(key_prefix + "slow-callback")
            for _ in range(300):
                if called:
                    break
                await asyncio.sleep(0.01)
            assert called

    asyncio.run(main())
    assert _warned(caplog, "slow-callback")
