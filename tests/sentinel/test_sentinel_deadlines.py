"""Sentinel clients keep every call's deadline when the master stops answering (SIGSTOP: its port
accepts, nothing replies) and the Sentinels have not failed it over (``down-after`` 60 s)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from _netfaults import Stopwatch
from turbolock import ConnectionError
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

T = 0.3


def test_calls_keep_their_deadline_when_the_master_stops_answering(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str) -> None:
    group = own_sentinel_group(replicas=1, sentinels=3, down_after=60000)
    master = group.node_at(group.master_port())
    watch = Stopwatch()
    with SentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                            timeout=T, connect_timeout=T) as client:
        held = client.try_acquire("held", 30)
        assert held is not None
        master.pause()
        try:
            for label, call in (("try_acquire", lambda: client.try_acquire("fresh", 30)),
                                ("release", lambda: client.release(held)),
                                ("query", lambda: client.query("held")),
                                ("acquire_many", lambda: client.acquire_many(["a", "b"], 30)),
                                ("acquire_many(fenced=True)",  # a transaction (SentinelExecutor's shape)
                                 lambda: client.acquire_many(["f", "g"], 30, fenced=True))):
                watch.expect_raises(watch.run(label, T, call), ConnectionError)
        finally:
            master.resume()

    async def body() -> None:
        async with AsyncSentinelLockClient(group.sentinel_urls, group.service, core=core_name,
                                           key_prefix=key_prefix, timeout=T, connect_timeout=T) as client:
            assert await client.query("held") is not None
            master.pause()
            try:
                calls: list[tuple[str, Callable[[], Any]]] = [
                    ("async try_acquire", lambda: client.try_acquire("fresh", 30)),
                    ("async query", lambda: client.query("held")),
                    ("async acquire_many", lambda: client.acquire_many(["a", "b"], 30)),
                    ("async acquire_many(fenced=True)",
                     lambda: client.acquire_many(["f", "g"], 30, fenced=True))]
                for label, call in calls:
                    watch.expect_raises(await watch.arun(label, T, call), ConnectionError)
            finally:
                master.resume()

    asyncio.run(body())
    watch.check()
