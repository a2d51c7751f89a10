"""``FencedStore.write_many`` / ``AsyncFencedStore.write_many`` check every item before anything
is sent and raise ``InvalidArgumentTypeError`` naming the argument, as they do for keys, values
and fences: an item that is not a (key, value, fence) triple escaped as a bare ValueError from
tuple unpacking (found by review)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio

from turbolock import FencedStore, InvalidArgumentTypeError
from turbolock.asyncio import AsyncFencedStore
from turbolock.redis_server import RedisServer

BAD_ITEMS = [
    pytest.param(lambda key: [(key, "v", 1), (key, "v")], id="pair-without-fence"),
    pytest.param(lambda key: [(key, "v", 1), key], id="bare-key"),
    pytest.param(lambda key: [(key, "v", 1), (key, "v", 2, "extra")], id="four-items"),
]


@pytest.mark.parametrize("items", BAD_ITEMS)
def test_a_malformed_item_raises_a_typed_error_before_sending(raw: redis.Redis, key_prefix: str,
                                                              items: Any) -> None:
    key = key_prefix + "k"
    with pytest.raises(InvalidArgumentTypeError):
        FencedStore(raw).write_many(items(key))
    assert raw.exists(key) == 0


@pytest.mark.parametrize("items", BAD_ITEMS)
def test_a_malformed_item_raises_a_typed_error_before_sending_asyncio(
        redis_server: RedisServer, raw: redis.Redis, key_prefix: str, items: Any) -> None:
    key = key_prefix + "k"

    async def body() -> None:
        data = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
        try:
            with pytest.raises(InvalidArgumentTypeError):
                await AsyncFencedStore(data).write_many(items(key))
        finally:
            await data.aclose()

    asyncio.run(body())
    assert raw.exists(key) == 0
