"""A ``close()`` cancelled once it stopped the renewer (a shutdown's ``wait_for`` shorter than
close's own deadline, against a slow server) leaves the client closed: later calls are refused
before anything is sent. It left a half-closed client (found in review): ``closed`` was False
and plain calls worked, but an auto-renewed acquire took its lock and then raised
``ClientClosedError`` ("expire by their ttl"): a lock held on the server that nobody held, not
released in the background either (``pending_cleanup`` 0), until its ttl ran out."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from async_helpers import Runner

from turbolock import ClientClosedError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


def test_an_acquire_after_a_cancelled_close_leaves_no_lock_nobody_holds(
        arun: Runner, own_server: RedisServer, own_raw: redis.Redis, core_name: str) -> None:
    async def body() -> None:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, timeout=2)
        renewed = await client.try_acquire("renewed", 30, auto_renew=True)
        assert renewed is not None
        own_server.pause()  # close's release of the renewed lock waits for an answer
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.close(), 0.3)
        finally:
            own_server.resume()
        assert client.closed, "a close cut short leaves the client half-closed"
        try:
            lease = await client.try_acquire("after", 60, auto_renew=True)
        except ClientClosedError:
            lease = None
        for _ in range(100):  # give a background release, if any, its chance
            if not own_raw.exists(client.key_prefix + b"after"):
                break
            await asyncio.sleep(0.02)
        held = own_raw.exists(client.key_prefix + b"after")
        if lease is not None:
            await client.release(lease)
        await client.close()
        assert lease is not None or not held, (
            "the acquire took the lock, then raised ClientClosedError: a lock nobody holds or releases "
            f"(pending_cleanup was {client.pending_cleanup}), until its 60 s ttl")

    arun(body)


def test_a_close_cancelled_before_it_stopped_the_renewer_stops_it(
        arun: Runner, own_server: RedisServer, core_name: str) -> None:
    """close() ends its waiters first; cancelled there (its subscriber still connecting to a
    server that does not answer), the client was closed but its renewer task ran on, renewing
    through connections that refuse every call, for the life of the loop."""
    async def body() -> None:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, timeout=2)
        renewed = await client.try_acquire("renewed", 30, auto_renew=True)
        renewer = client._renewer_instance
        assert renewed is not None and renewer is not None
        assert renewer._task is not None and not renewer._task.done()
        own_server.pause()
        try:
            await client._wake_join(client.key_prefix + b"awaited", time.monotonic() + 0.1)
            closing = asyncio.ensure_future(client.close())
            await asyncio.sleep(0)  # close() waits for its subscriber's connect to end
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
        finally:
            own_server.resume()
        assert client.closed
        await asyncio.sleep(0.05)
        assert renewer._task.done(), "the renewer task outlived a cancelled close()"

    arun(body)
