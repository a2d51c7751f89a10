"""A cancelled all_or_nothing acquire_many whose roll-back is under way leaves no lock behind.

README: "A task cancelled while acquiring never leaves a lock behind". With one name held by
someone else, ``acquire_many(all_or_nothing=True)`` takes the others and then rolls them back
with RELEASE_MANY (``bulk_flows._roll_back``). When that release needs a second round trip (the
server answered NOSCRIPT: after a restart, a failover or SCRIPT FLUSH; or more than two writes
of batched calls), a cancel landing in between dropped the roll-back: the locks stayed held
until their ttl with nothing owed in the background (found in review). The roll-back now
leaves them to the background cleanup when it is interrupted.
"""

from __future__ import annotations

import asyncio

import pytest
import redis

from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


async def _settle(client: AsyncLockClient) -> None:
    for _ in range(500):
        await client.query("probe")  # every reply in flight before it is in
        if client.pending_cleanup == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("pending cleanup never finished")


@pytest.mark.parametrize("fenced", [False, True], ids=["plain", "fenced"])
def test_cancelled_all_or_nothing_rollback_leaves_no_lock(redis_server: RedisServer, raw: redis.Redis,
                                                        core_name: str, key_prefix: str,
                                                        fenced: bool) -> None:
    names = [f"n{i}" for i in range(15)]
    prefix = key_prefix.encode()

    async def body() -> list[tuple[int, int]]:
        left_behind = []
        client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
        try:
            await client.query("warm-up")
            for k in [k for _ in range(5) for k in range(40)]:  # every await point, a few times
                raw.set(prefix + b"n14", b"someone-else", px=30000)  # the call cannot take all
                raw.script_flush()  # the roll-back's RELEASE_MANY is answered NOSCRIPT, then resent
                task = asyncio.ensure_future(client.acquire_many(names, 30, all_or_nothing=True,
                                                                 fenced=fenced))
                for _ in range(k):
                    await asyncio.sleep(0)
                task.cancel()
                try:
                    result = await task
                    assert result.acquired == []
                except asyncio.CancelledError:
                    pass
                await _settle(client)
                ours = [key for key in raw.scan_iter(match=prefix + b"n*") if key != prefix + b"n14"]
                if ours:
                    left_behind.append((k, len(ours)))
                    raw.delete(*ours)
                raw.delete(prefix + b"n14")
        finally:
            await client.close()
        return left_behind

    left_behind = asyncio.run(body())
    # Each entry: (loop iterations before the cancel, locks still held with pending_cleanup == 0).
    assert left_behind == []
