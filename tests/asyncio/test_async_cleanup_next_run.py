"""A maybe-held lock owed in the background when one ``asyncio.run()`` ends is released in the
next one, once the client is used there and the server answers (README: released in the
background "as soon as the server answers, even if the client makes no other call"). It was
never released: the cleanup task was not started again in the new loop (found in review)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from async_helpers import LOOPS

from turbolock import AcquireOutcomeUnknownError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning")


def run_once(loop_name: str, body):  # type: ignore[no-untyped-def]
    if loop_name == "asyncio":
        return asyncio.run(body())
    import uvloop

    return uvloop.run(body())


@pytest.mark.parametrize("loop_name", LOOPS)
def test_cleanup_owed_at_the_end_of_a_run_goes_on_in_the_next(loop_name: str, own_server: RedisServer,
                                                              core_name: str, key_prefix: str) -> None:
    raw = redis.Redis.from_url(own_server.url)
    client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.5)
    key = key_prefix.encode() + b"owed"

    async def first() -> None:
        await client.query("warm-up")
        own_server.pause()
        with pytest.raises(AcquireOutcomeUnknownError):
            await client.try_acquire("owed", 60)  # the SET is written, its reply never comes
        assert client.pending_cleanup == 1
        await asyncio.sleep(0.2)  # the background release is tried, and backs off

    try:
        run_once(loop_name, first)
    finally:
        own_server.resume()
    deadline = time.monotonic() + 5
    while not raw.exists(key) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert raw.exists(key) == 1, "the server ran the SET once resumed: a lock taken for nobody"

    async def second() -> None:
        end = time.monotonic() + 5
        while time.monotonic() < end and (client.pending_cleanup or raw.exists(key)):
            await client.query("other")  # the client is in use, the server answers
            await asyncio.sleep(0.05)
        left, owed = raw.exists(key), client.pending_cleanup
        await client.close()
        assert owed == 0 and left == 0, f"owed {owed}, key left {left}: the background release never resumed"

    try:
        run_once(loop_name, second)
    finally:
        raw.delete(key)
