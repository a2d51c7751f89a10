"""Every Sentinel hung (SIGSTOPped: each accepts connections, none answers), a client that does
not know the master yet: the asyncio client raises the Sentinels' own ConnectionError ("no
Sentinel gave the master of ...: <each Sentinel's failure>") within its deadline, as the threaded
client does (found in review: it raised UnsentTimeoutError naming none of them, its caller's wait
for the pool's connect ending a moment before the connect's own deadline, counted from later)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from turbolock import ConnectionError, TimeoutError
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

TIMEOUT = 1.0


def _outcome(call: Callable[[], object]) -> tuple[BaseException, float]:
    started = time.monotonic()
    try:
        call()
    except BaseException as exc:  # the outcome compared
        return exc, time.monotonic() - started
    raise AssertionError("the call succeeded with every Sentinel hung")


@pytest.mark.parametrize("core_name", ["c"], indirect=True)
def test_every_sentinel_hung_fails_alike_on_both_fronts(sentinel_group: RedisSentinel, core_name: str,
                                                         key_prefix: str) -> None:
    sync_client = SentinelLockClient(sentinel_group.sentinel_urls, sentinel_group.service, core=core_name,
                                     key_prefix=key_prefix, timeout=TIMEOUT)
    async_client = AsyncSentinelLockClient(sentinel_group.sentinel_urls, sentinel_group.service,
                                           core=core_name, key_prefix=key_prefix, timeout=TIMEOUT)
    for sentinel in sentinel_group.sentinels:
        sentinel.pause()
    try:
        threaded, threaded_took = _outcome(lambda: sync_client.try_acquire("job", 10))

        async def attempt() -> None:
            await async_client.try_acquire("job", 10)

        asynced, async_took = _outcome(lambda: asyncio.run(attempt()))
    finally:
        for sentinel in sentinel_group.sentinels:
            sentinel.resume()
        sync_client.close()
        asyncio.run(async_client.close())
    assert threaded_took < TIMEOUT + 0.3 and async_took < TIMEOUT + 0.3
    assert isinstance(threaded, ConnectionError) and not isinstance(threaded, TimeoutError)
    assert "no Sentinel gave the master" in str(threaded)
    assert type(asynced) is type(threaded), (
        f"threaded: {type(threaded).__name__}({threaded}); asyncio: {type(asynced).__name__}({asynced})")
    assert "no Sentinel gave the master" in str(asynced), f"asyncio: {asynced!r}"
