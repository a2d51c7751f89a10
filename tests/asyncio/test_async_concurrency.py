"""Many tasks on one client: exactly one holder at a time on one key, no interference on distinct keys."""

from __future__ import annotations

import asyncio

import redis
from async_helpers import NewClient, Runner, keys_left

from turbolock import AutoRenew


def test_200_tasks_on_one_key_hold_it_one_at_a_time(arun: Runner, new_client: NewClient,
                                                    raw: redis.Redis) -> None:
    holders = 0
    entered = 0
    overlaps = 0

    async def worker(client: object, index: int) -> None:
        nonlocal holders, entered, overlaps
        from turbolock.asyncio import AsyncLockClient

        assert isinstance(client, AsyncLockClient)
        async with client.lock("hot", 10, timeout=None):
            holders += 1
            entered += 1
            if holders != 1:
                overlaps += 1
            # Hold across a few loop iterations and a round trip, so others really contend.
            await asyncio.sleep(0)
            lock_info = await client.query("hot")
            assert lock_info.held
            await asyncio.sleep(0)
            if holders != 1:
                overlaps += 1
            holders -= 1

    async def body() -> None:
        # Two clients (two sets of connections) share the key, as two processes would.
        async with new_client() as first, new_client(max_connections=3) as second:
            await asyncio.gather(*(worker(first if i % 2 else second, i) for i in range(200)))
            assert keys_left(raw, first.key_prefix) == []
        assert entered == 200
        assert overlaps == 0

    arun(body)


def test_64_tasks_on_distinct_keys(arun: Runner, new_client: NewClient, raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            tokens: set[bytes] = set()

            async def worker(task: int) -> int:
                done = 0
                for i in range(40):
                    lease = await client.try_acquire(f"k:{task}:{i % 4}", 10)
                    assert lease is not None, "nobody else uses this task's keys"
                    tokens.add(lease.token)
                    assert await client.release(lease) is True
                    done += 1
                return done

            assert await asyncio.gather(*(worker(t) for t in range(64))) == [40] * 64
            assert len(tokens) == 64 * 40, "two acquisitions shared a token"
            assert keys_left(raw, client.key_prefix) == []

    arun(body)


def test_tasks_mixing_every_call(arun: Runner, new_client: NewClient, raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(chunk_size=50, timeout=1) as client:
            async def single(task: int) -> None:
                for _ in range(10):
                    lease = await client.try_acquire(f"s:{task}", 10)
                    assert lease is not None
                    assert await client.extend(lease, 20)
                    assert (await client.check(lease) or 0) > 19
                    assert (await client.query(f"s:{task}")).held
                    assert await client.release(lease)

            async def bulky(task: int) -> None:
                names = [f"b:{task}:{i}" for i in range(120)]
                result = await client.acquire_many(names, 10)
                assert result.all_acquired
                assert all(await client.extend_many(result.acquired, 20))
                assert all(info.held for info in await client.query_many(names))
                assert all(await client.release_many(result.acquired))

            async def renewed(task: int) -> None:
                lease = await client.try_acquire(f"r:{task}", 5, auto_renew=AutoRenew(renew_before=2))
                assert lease is not None and lease.auto_renew
                await asyncio.sleep(0.02)
                assert await client.release(lease)

            await asyncio.gather(*(single(t) for t in range(16)), *(bulky(t) for t in range(8)),
                                 *(renewed(t) for t in range(8)))
            assert keys_left(raw, client.key_prefix) == []
            assert client.renewing == 0

    arun(body)
