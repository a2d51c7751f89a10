"""``AsyncRedlockClient.wait_lost`` in a later ``asyncio.run()`` than the acquire's: the lock is
still renewed, or reported lost, as the one-server client's (tests/asyncio/
test_async_wait_lost_next_run.py). It did not move the Redlock renewer to the running loop
(only a call that needs a master's connection did): the lock expired on the masters unrenewed
and ``wait_lost`` returned False ("not lost") at its timeout (found in review of the one-server
client's)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning")


def test_wait_lost_in_the_next_run_sees_the_lock_renewed_or_lost(session_masters: list[RedisServer],
                                                                 core_name: str, key_prefix: str) -> None:
    servers = session_masters[:3]
    client = AsyncRedlockClient([server.url for server in servers], core=core_name, key_prefix=key_prefix)

    async def take() -> Any:
        return await client.try_acquire("job", ttl=0.6, auto_renew=True)

    lease = asyncio.run(take())
    assert lease is not None
    raws = [redis.Redis(port=server.port) for server in servers]
    key = key_prefix.encode() + b"job"

    async def watch() -> tuple[bool, int, float]:
        started = time.monotonic()
        lost = await client.wait_lost(lease, timeout=2)  # about three ttls
        return lost, sum(1 for raw in raws if raw.exists(key)), time.monotonic() - started

    try:
        lost, holding, waited = asyncio.run(watch())
        assert holding >= 2 or lost, (f"the lock expired unrenewed ({waited:.2f}s; held on {holding} "
                                      f"masters) and wait_lost said it was not lost")
    finally:
        asyncio.run(client.close())
        for raw in raws:
            raw.close()
