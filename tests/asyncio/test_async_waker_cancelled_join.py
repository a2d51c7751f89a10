"""A waiter cancelled while the asyncio subscriber connection is still being made must not leave
its key half-subscribed: a later waiter of that key must still be woken by the release (or at
worst poll every 50-200 ms), not sit out its whole join deadline. (The new connection once
subscribed only the keys still waited for and left the cancelled waiter's key "subscribing",
so the next waiter waited for a confirmation that never came: found by a reviewer.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import redis
from async_helpers import Runner

from turbolock.asyncio import AsyncLockClient


def test_a_waiter_cancelled_while_the_subscriber_connects_does_not_deafen_the_next(
        arun: Runner, new_client: Callable[..., AsyncLockClient], raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(timeout=3.0) as holder_client, new_client(timeout=3.0) as client:
            holder = holder_client.lock("k", 30)
            assert await holder.acquire()
            first = asyncio.ensure_future(client.lock("k", 30).acquire(timeout=20))
            waker = None
            # Until the first waiter joined and the subscriber is connecting: bounded by time, not
            # by loop turns (its first SET NX reply may take longer than 2000 turns on a busy host).
            joined_by = time.monotonic() + 5.0
            while time.monotonic() < joined_by:
                waker = client._waker_instance
                if waker is not None and waker.book.queues and waker._protocol is None:
                    break
                await asyncio.sleep(0)
            assert waker is not None and waker.book.queues and waker._protocol is None
            first.cancel()
            try:
                await first
            except asyncio.CancelledError:
                pass
            for _ in range(200):  # the subscriber connection is made
                if waker._protocol is not None:
                    break
                await asyncio.sleep(0.01)
            assert waker._protocol is not None
            await asyncio.sleep(0.1)
            second = asyncio.ensure_future(client.lock("k", 30).acquire(timeout=20))
            await asyncio.sleep(0.5)
            assert not second.done()
            key = client.key_prefix + b"k"
            subscribers = raw.execute_command("PUBSUB", "SHARDNUMSUB", key)
            released = time.monotonic()
            await holder.release()
            assert await second
            took = time.monotonic() - released
            state = waker.book.state.get(key)
            assert took < 0.3, (f"the waiter took the released lock {took:.2f} s after the release "
                                f"(shard subscribers of the key: {subscribers}; book state {state})")

    arun(body)
