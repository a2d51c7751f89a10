"""An asyncio call that waited for a connect another call started, which failed by that call's
deadline, opens one itself within its own (tests/_shared_connect.py). Found in review."""

from __future__ import annotations

import asyncio

import pytest

from _shared_connect import T, call_after_a_shared_connect_failed
from turbolock import Lease, LockError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing


def test_a_call_sharing_a_failed_connect_opens_its_own(own_server: RedisServer, core_name: str,
                                                        key_prefix: str) -> None:
    async def scenario() -> tuple[object, object]:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                                          connect_timeout=T)
        try:
            assert await client.try_acquire("warm-up", 30) is not None
            own_server.pause()
            with pytest.raises(LockError):  # times out: the connection is dropped
                await client.try_acquire("first", 30)
            return await call_after_a_shared_connect_failed(client, own_server)
        finally:
            own_server.resume()
            await client.close()

    a, b = asyncio.run(scenario())
    assert isinstance(a, LockError), a
    assert isinstance(b, Lease), f"B ended with {b!r} with 0.5 s of its own left"
