"""``FencedStore.write_many`` / ``AsyncFencedStore.write_many`` when the server refuses one item
(its key holds another type: WRONGTYPE): the items around it were written, and the caller must be
told which. redis-py's pipeline raised the first error alone, and the written items went unreported
(found in review); now a typed ``FencedWriteError`` names the refused keys and carries ``written``,
one flag per item in input order."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from turbolock import FencedStore, FencedWriteError, ResponseError
from turbolock.asyncio import AsyncFencedStore
from turbolock.redis_server import RedisServer


def _items(key_prefix: str) -> list[tuple[str, int, int]]:
    return [(key_prefix + "a", 1, 5), (key_prefix + "plain", 2, 5), (key_prefix + "b", 3, 5),
            (key_prefix + "stale", 4, 1)]


def _prepare(raw: redis.Redis, key_prefix: str) -> None:
    raw.set(key_prefix + "plain", "not a hash")  # the script's HGET answers WRONGTYPE
    assert FencedStore(raw).write(key_prefix + "stale", 0, 9)  # a higher fence seen: refused, no error


def _check(error: FencedWriteError, raw: redis.Redis, key_prefix: str) -> None:
    assert isinstance(error, ResponseError) and error.code == "WRONGTYPE"
    assert error.written == [True, False, True, False]
    assert error.names == [key_prefix + "plain"]
    assert raw.hget(key_prefix + "a", "value") == b"1" and raw.hget(key_prefix + "b", "value") == b"3"
    assert raw.get(key_prefix + "plain") == b"not a hash"
    assert raw.hget(key_prefix + "stale", "value") == b"0"


def test_a_refused_item_is_named_and_the_written_ones_reported(raw: redis.Redis, key_prefix: str) -> None:
    _prepare(raw, key_prefix)
    with pytest.raises(FencedWriteError) as caught:
        FencedStore(raw).write_many(_items(key_prefix))
    _check(caught.value, raw, key_prefix)


def test_a_refused_item_is_named_and_the_written_ones_reported_asyncio(
        redis_server: RedisServer, raw: redis.Redis, key_prefix: str) -> None:
    _prepare(raw, key_prefix)

    async def body() -> FencedWriteError:
        data = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
        try:
            with pytest.raises(FencedWriteError) as caught:
                await AsyncFencedStore(data).write_many(_items(key_prefix))
            return caught.value
        finally:
            await data.aclose()

    _check(asyncio.run(body()), raw, key_prefix)
