"""``AsyncFencedStore``: the resource's half of fencing for asyncio services, through
``redis.asyncio``. It refuses reads and writes with an older fence than its key has seen, checks
every argument before anything is sent, and in the scenario it exists for (a holder paused past
its ttl while a successor reads and writes) refuses the late write, where plain writes (the
control) lose the successor's update."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio
from async_helpers import Runner

from turbolock import InvalidArgumentTypeError, StaleFenceError
from turbolock.asyncio import AsyncFencedStore, AsyncLockClient

TTL = 0.2


def test_the_store_refuses_an_older_fence_on_reads_and_writes(arun: Runner, url: str,
                                                              key_prefix: str) -> None:
    async def body() -> None:
        data = redis.asyncio.Redis.from_url(url)
        try:
            store = AsyncFencedStore(data)
            key = key_prefix + "balance"
            assert await store.read(key, 1) is None
            assert await store.write(key, 100, 1)
            assert await store.read(key, 2) == b"100"  # the successor has read: the old holder may not write
            assert not await store.write(key, 101, 1)
            with pytest.raises(StaleFenceError):
                await store.read(key, 1)
            assert await store.write(key, 150, 2) and await store.read(key, 2) == b"150"
            written = await store.write_many([(key, 160, 1), (key, 170, 3), (key_prefix + "fresh", 1, 1)])
            assert written == [False, True, True]
            assert await store.read(key, 3) == b"170"
        finally:
            await data.aclose()

    arun(body)


@pytest.mark.parametrize(("call", "argument"), [
    (lambda store, key: store.write(key, None, 1), "value"),
    (lambda store, key: store.write(key, "v", 0), "fence"),
    (lambda store, key: store.read(None, 1), "key"),
    (lambda store, key: store.read(key, (1, 2)), "fence"),  # plain numbers: not a Redlock lease's fences
    (lambda store, key: store.write_many([(key, "v", 1), (key, True, 2)]), "value"),
], ids=["value-None", "fence-0", "key-None", "fence-tuple", "write_many-value-bool"])
def test_bad_arguments_raise_a_typed_error_naming_them_before_sending(
        arun: Runner, url: str, key_prefix: str, raw: redis.Redis,
        call: Callable[[AsyncFencedStore, str], Any], argument: str) -> None:
    async def body() -> None:
        data = redis.asyncio.Redis.from_url(url)
        try:
            with pytest.raises(InvalidArgumentTypeError) as raised:
                await call(AsyncFencedStore(data), key_prefix + "k")
            assert raised.value.argument == argument  # type: ignore[attr-defined]
        finally:
            await data.aclose()

    arun(body)
    assert raw.keys(f"{key_prefix}*") == []


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "plain-control"])
def test_a_holder_paused_past_its_ttl_cannot_overwrite_its_successor(
        arun: Runner, url: str, new_client: Callable[..., AsyncLockClient], key_prefix: str,
        raw: redis.Redis, fenced: bool) -> None:
    account = key_prefix + "data:account"  # the resource's key, beside the lock's ("account")

    async def body() -> None:
        data = redis.asyncio.Redis.from_url(url)
        store = AsyncFencedStore(data)

        async def read(fence: int | None) -> int:
            if fence is not None:
                return int(await store.read(account, fence) or 0)
            return int(await data.hget(account, "value") or 0)

        async def write(value: int, fence: int | None) -> bool:
            if fence is not None:
                return await store.write(account, value, fence)
            await data.hset(account, "value", value)
            return True

        try:
            async with new_client() as first_client, new_client() as second_client:
                first = await first_client.try_acquire("account", TTL, fenced=fenced)
                assert first is not None
                seen = await read(first.fence)  # then the first holder pauses past its ttl
                await asyncio.sleep(TTL * 2)
                second = await second_client.try_acquire("account", 30, fenced=fenced)
                assert second is not None
                assert await write(await read(second.fence) + 10, second.fence)
                late = await write(seen + 1, first.fence)  # the first holder wakes and writes
                assert await second_client.release(second)
                assert late is not fenced
        finally:
            await data.aclose()

    arun(body)
    balance = int(raw.hget(account, "value") or 0)
    if fenced:
        assert balance == 10, "the late write went through despite its old fence"
    else:  # the control: the late write overwrote the successor's, its update lost
        assert balance == 1
