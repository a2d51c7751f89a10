"""The asyncio Sentinel client: a call that waited for a connect to the master another call
started (the master forgotten after a failed call: Sentinels asked, connect, ROLE), which failed
by that call's deadline, opens one itself within its own (tests/_shared_connect.py). Found in
review."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from _shared_connect import T, a_shared_connect_fails
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel

pytestmark = pytest.mark.timing


def test_a_call_sharing_a_failed_connect_opens_its_own(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str) -> None:
    group = own_sentinel_group(replicas=1, sentinels=3, down_after=60000)
    master = group.node_at(group.master_port())

    async def scenario() -> None:
        client = AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name,
                                         key_prefix=key_prefix, timeout=T, connect_timeout=T)
        await a_shared_connect_fails(client, master)

    asyncio.run(scenario())
