"""asyncio waiters cancelled mid-wait: no ticket is left in the client's book, the others
still get the lock in turn, and the subscriptions go once nobody waits (asyncio and uvloop)."""

from __future__ import annotations

import asyncio
import time

import redis
from async_helpers import NewClient, Runner


def test_cancelled_waiters_leave_nothing_behind(arun: Runner, new_client: NewClient, raw: redis.Redis,
                                                key_prefix: str) -> None:
    channels = [(key_prefix + f"cancel{i}").encode() for i in range(5)]

    def subscribed() -> int:
        counts = raw.execute_command("PUBSUB", "SHARDNUMSUB", *channels)
        return int(sum(counts[1::2]))

    async def body() -> None:
        client = new_client()
        held = [await client.try_acquire(f"cancel{i}", 30) for i in range(5)]
        assert all(held)
        waiters = [asyncio.ensure_future(client.lock(f"cancel{i}", 30).acquire(timeout=20)) for i in range(5)]
        # and one that stays, behind a cancelled one on the same name
        stays = asyncio.ensure_future(client.lock("cancel0", 30).acquire(timeout=20))
        await asyncio.sleep(0.3)
        assert subscribed() == 5
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        assert all(waiter.cancelled() for waiter in waiters)
        book = client._waker().book
        assert book.waiting == 1  # only the one that stays
        assert await client.release(held[0])
        assert await asyncio.wait_for(stays, 5)  # the cancelled waiter ahead of it passed on nothing it owed
        for lease in held[1:]:
            assert await client.release(lease)
        assert book.waiting == 0 and not book.queues
        ends = time.monotonic() + 5
        while subscribed() and time.monotonic() < ends:
            await asyncio.sleep(0.05)
        assert subscribed() == 0  # idle subscriptions expire (about a second)
        await client.close()

    arun(body)
