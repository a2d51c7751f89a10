"""An asyncio call that waited for a connect another call started, which failed by that call's
deadline, opens one itself within its own (tests/_shared_connect.py). Found in review."""

from __future__ import annotations

import asyncio

import pytest

from _shared_connect import T, a_shared_connect_fails
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing


def test_a_call_sharing_a_failed_connect_opens_its_own(own_server: RedisServer, core_name: str,
                                                        key_prefix: str) -> None:
    async def scenario() -> None:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                                          connect_timeout=T)
        await a_shared_connect_fails(client, own_server)

    asyncio.run(scenario())
