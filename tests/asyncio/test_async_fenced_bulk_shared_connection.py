"""Many tasks on one pipelined connection while fenced bulk acquires' transactions are in flight
(one of them cancelled after 0-5 loop iterations): every other task gets its own reply, never a
transaction's QUEUED or a neighbour's; the bulk acquires' fences are new and growing; nothing is
left held once the calls are settled, and the connection stays usable. (Written in review.)"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import redis
from async_helpers import NewClient, Runner, keys_left, settle

from turbolock import Lease
from turbolock.asyncio import AsyncLockClient

KINDS = 5


def _small_call(client: AsyncLockClient, rnd: int, i: int) -> Any:
    """Call ``i`` of round ``rnd``: a query, a fenced or plain single acquire, a fenced bulk of two
    (the second name held by someone else) or a fenced claim of two among four."""
    kind = i % KINDS
    if kind == 0:
        return client.query(f"o{i % 50}")
    if kind in (1, 2):
        return client.try_acquire(f"s{rnd}:{i}", 30, fenced=kind == 1)
    if kind == 3:
        return client.acquire_many([f"m{rnd}:{i}", f"o{(2 * i) % 50}"], 30, fenced=True)
    return client.acquire_many([f"c{rnd}:{i}:{j}" for j in range(4)], 30, limit=2, fenced=True)


def _check_small(i: int, result: Any) -> None:
    kind = i % KINDS
    assert not isinstance(result, BaseException), (i, repr(result))
    if kind == 0:
        assert result.held is ((i % 50) % 2 == 0), (i, result)
    elif kind in (1, 2):
        assert isinstance(result, Lease), (i, result)
        assert kind == 2 or (isinstance(result.fence, int) and result.fence > 10**15), result
    elif kind == 3:
        assert [lease is not None for lease in result.leases] == [True, False], (i, result.leases)
    else:
        assert len(result.acquired) == 2, (i, result)


def test_concurrent_tasks_get_their_own_replies(arun: Runner, new_client: NewClient,
                                                raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(max_connections=1) as client:
            await client.query("warm-up")
            rng = random.Random(7)
            for i in range(0, 50, 2):  # held by someone else
                raw.set(client.key_prefix + f"o{i}".encode(), b"x", px=60000)
            for rnd in range(6):
                bulks = [asyncio.ensure_future(client.acquire_many([f"b{rnd}:{k}:{i}" for i in range(3000)],
                                                                   30, fenced=True)) for k in range(3)]
                small: list[asyncio.Future[Any]] = []
                for i in range(300):
                    small.append(asyncio.ensure_future(_small_call(client, rnd, i)))
                    if rng.random() < 0.05:
                        await asyncio.sleep(0)
                for _ in range(rng.randrange(0, 6)):
                    await asyncio.sleep(0)
                bulks[rnd % 3].cancel()
                results = await asyncio.gather(*small, return_exceptions=True)
                for i, result in enumerate(results):
                    _check_small(i, result)
                for k, bulk in enumerate(await asyncio.gather(*bulks, return_exceptions=True)):
                    if isinstance(bulk, BaseException):
                        assert isinstance(bulk, asyncio.CancelledError), repr(bulk)
                        continue
                    assert len(bulk.acquired) == 3000, (k, len(bulk.acquired))
                    fences = [lease.fence for lease in bulk.acquired]
                    assert fences == sorted(fences) and len(set(fences)) == len(fences)
                    await client.release_many(bulk.acquired)
                for result in results:
                    if isinstance(result, Lease):
                        assert await client.release(result)
                    elif hasattr(result, "acquired"):
                        await client.release_many(result.acquired)
                await settle(client)
                left = [key for key in keys_left(raw, client.key_prefix) if b":o" not in key]
                assert left == [], (rnd, left[:5], len(left))
                assert await client.query("o0") is not None

    arun(body)
