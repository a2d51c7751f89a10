"""Claiming at most k free locks on asyncio: the blocking claim's results and errors, tasks that
share the shards between them, and nothing left held by a claim that failed or was cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import redis
from async_helpers import NewClient, Runner, keys_left

from turbolock import AcquireOutcomeUnknownError, InvalidArgumentError, InvalidArgumentTypeError
from turbolock._flows.claim import ClaimResult
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


async def claim(client: AsyncLockClient, names: Sequence[Any], ttl: Any, limit: Any,
                **kwargs: Any) -> ClaimResult:
    """The call under test."""
    result = await client.acquire_many(names, ttl, limit=limit, **kwargs)
    assert isinstance(result, ClaimResult)
    return result


def shards(count: int) -> list[str]:
    return [f"shard:{i}" for i in range(count)]


async def eventually_no_keys(client: AsyncLockClient, raw: redis.Redis, within: float = 10.0) -> None:
    """Maybe-held locks are released in the background: wait for it, within a few seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while left := keys_left(raw, client.key_prefix):
        if loop.time() > deadline:
            raise AssertionError(f"{len(left)} keys still held {within:g}s later: {sorted(left)[:5]}")
        await client.query("poll")
        await asyncio.sleep(0.05)


class BeforeCall:
    """The client's executor, running ``action`` right before its ``n``-th ``many`` call."""

    def __init__(self, inner: Any, n: int = 0, action: Callable[[], object] = lambda: None) -> None:
        self.inner = inner
        self.n = n
        self.action = action
        self.calls = 0

    async def many(self, *args: Any, **kwargs: Any) -> list[object]:
        self.calls += 1
        if self.calls == self.n:
            self.action()
        result: list[object] = await self.inner.many(*args, **kwargs)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def hook(client: AsyncLockClient, n: int = 0, action: Callable[[], object] = lambda: None) -> BeforeCall:
    hooked = BeforeCall(client._exec, n, action)
    client._exec = hooked  # type: ignore[assignment]
    return hooked


def test_takes_exactly_k_and_skips_names_held_by_others(arun: Runner, new_client: NewClient,
                                                        raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(chunk_size=8) as client:
            names = shards(64)
            counter = hook(client)
            result = await claim(client, names, 30, 16)
            assert len(result.acquired) == 16 and result.not_acquired == [] and len(result.not_tried) == 48
            assert counter.calls == 2, "one round trip per chunk of 8"
            for lease in result.acquired:
                assert raw.get(client.key_prefix + lease.key) == lease.token
            others = {lease.name for lease in result.acquired}
            again = await claim(client, names, 30, 16)
            taken = {lease.name for lease in again.acquired}
            assert len(taken) == 16 and not taken & others
            assert set(again.not_acquired) <= others
            assert len(keys_left(raw, client.key_prefix)) == 32
            await client.release_many(result.acquired + again.acquired)

    arun(body)


def test_a_limit_above_the_free_names_takes_all_of_them(arun: Runner, new_client: NewClient,
                                                        raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client(chunk_size=7) as client:
            names = shards(50)
            others = set(range(0, 50, 5))
            for i in others:
                raw.set(client.key_prefix + names[i].encode(), b"other", px=30000)
            result = await claim(client, names, 30, 100)
            assert [lease is not None for lease in result] == [i not in others for i in range(50)]
            assert result.not_acquired == [names[i] for i in sorted(others)] and result.not_tried == []
            await client.release_many(result.acquired)

    arun(body)


def test_tasks_share_the_shards(arun: Runner, new_client: NewClient, raw: redis.Redis) -> None:
    async def body() -> None:
        names = shards(64)
        clients = [new_client() for _ in range(4)]
        try:
            results = await asyncio.gather(*(claim(client, names, 30, 16) for client in clients))
            taken = [{lease.name for lease in result.acquired} for result in results]
            assert [len(t) for t in taken] == [16] * 4
            assert set().union(*taken) == set(names), "no shard held twice, none left over"
        finally:
            for client in clients:
                await client.close()
        assert len(keys_left(raw, clients[0].key_prefix)) == 64

    arun(body)


def test_script_is_loaded_again_after_script_flush(arun: Runner, new_client: NewClient,
                                                   raw: redis.Redis) -> None:
    async def body() -> None:
        async with new_client() as client:
            first = await claim(client, shards(10), 30, 2)
            await client.release_many(first.acquired)
            raw.script_flush()
            result = await claim(client, shards(10), 30, 4)
            assert len(result.acquired) == 4 and len(keys_left(raw, client.key_prefix)) == 4
            await client.release_many(result.acquired)

    arun(body)


def test_bad_limits_are_refused_before_anything_is_sent(arun: Runner, own_server: RedisServer,
                                                        own_raw: redis.Redis, core_name: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name) as client:
            for limit, error in ((0, InvalidArgumentError), (-1, InvalidArgumentError),
                                 (1.0, InvalidArgumentTypeError),
                                 (False, InvalidArgumentTypeError)):
                with pytest.raises(error) as raised:
                    await claim(client, ["a", "b"], 30, limit)
                assert raised.value.argument == "limit"  # type: ignore[attr-defined]
            with pytest.raises(InvalidArgumentError) as duplicate:
                await claim(client, ["a", "a"], 30, 1)
            assert duplicate.value.argument == "names"
        stats = own_raw.info("commandstats")
        assert not {"cmdstat_evalsha", "cmdstat_script", "cmdstat_set"} & set(stats), stats
        assert own_raw.dbsize() == 0

    arun(body)


def test_a_lost_reply_gives_back_everything_the_claim_took(arun_asyncio: Runner, own_server: RedisServer,
                                                           own_raw: redis.Redis, core_name: str,
                                                           key_prefix: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix,
                                            timeout=0.3, chunk_size=8) as client:
            await client.query("warm-up")
            names = shards(64)
            hook(client, 2, own_server.pause)
            try:
                with pytest.raises(AcquireOutcomeUnknownError) as raised:
                    await claim(client, names, 60, 12)
            finally:
                own_server.resume()
            error = raised.value
            assert error.acquired == [] and len(error.names) == 16, "8 taken, 8 in the lost chunk"
            assert error.not_sent == [name for name in names if name not in error.names]
            await eventually_no_keys(client, own_raw)

    arun_asyncio(body)


def test_a_cancelled_claim_leaves_nothing_held(arun_asyncio: Runner, own_server: RedisServer,
                                               own_raw: redis.Redis, core_name: str, key_prefix: str) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix,
                                            chunk_size=8) as client:
            await client.query("warm-up")
            hook(client, 2, own_server.pause)
            task = asyncio.ensure_future(claim(client, shards(64), 60, 12))
            try:
                await asyncio.sleep(0.2)  # the first chunk took 8; the second waits on the paused server
                assert not task.done()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                own_server.resume()
            await eventually_no_keys(client, own_raw)
            assert (await claim(client, shards(64), 60, 12)).acquired, "the client works again"

    arun_asyncio(body)
