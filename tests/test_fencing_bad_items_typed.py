"""Bad input that escaped as a plain TypeError instead of turbolock's typed error naming the
argument (README: InvalidArgumentError / InvalidArgumentTypeError, ``.argument`` names it):
``FencedStore.write_many(None)`` (and its asyncio twin) and ``fenced_sql``'s ``paramstyle`` given
as a list (an unhashable value looked up in a dict). Found in review."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from turbolock import FencedStore, InvalidArgumentError, InvalidArgumentTypeError, LockError
from turbolock.asyncio import AsyncFencedStore
from turbolock.fenced_sql import fenced_read_sql, fenced_write_sql
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("items", [None, 5], ids=["None", "int"])
def test_write_many_of_a_non_sequence_names_items(redis_server: RedisServer, items: object) -> None:
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    try:
        with pytest.raises(LockError) as raised:
            FencedStore(raw).write_many(items)  # type: ignore[arg-type]
        assert isinstance(raised.value, InvalidArgumentTypeError)
        assert raised.value.argument == "items"
    finally:
        raw.close()


def test_async_write_many_of_a_non_sequence_names_items(redis_server: RedisServer) -> None:
    async def main() -> BaseException:
        raw = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
        try:
            await AsyncFencedStore(raw).write_many(None)  # type: ignore[arg-type]
        except BaseException as exc:  # the test looks at what escaped
            return exc
        finally:
            await raw.aclose()
        raise AssertionError("write_many(None) went through")

    raised = asyncio.run(main())
    assert isinstance(raised, InvalidArgumentTypeError), repr(raised)
    assert raised.argument == "items"


@pytest.mark.parametrize("make", [fenced_write_sql, fenced_read_sql])
def test_an_unhashable_paramstyle_is_a_typed_error(make: object) -> None:
    with pytest.raises(LockError) as raised:
        make("accounts", "id", ["balance"], paramstyle=["named"])  # type: ignore[operator]
    assert isinstance(raised.value, InvalidArgumentError | InvalidArgumentTypeError)
    assert raised.value.argument == "paramstyle"  # type: ignore[attr-defined]


def test_a_store_over_the_wrong_kind_of_client_is_refused_before_anything_is_sent(
        redis_server: RedisServer, raw: redis.Redis, key_prefix: str) -> None:
    """FencedStore over a redis.asyncio client answered write() True while nothing ran (a
    coroutine never awaited); AsyncFencedStore over a blocking client ran the write, blocking the
    loop, then raised an untyped TypeError; anything else (the lock client itself, a URL, a
    pipeline) an AttributeError, or a write said written that a pipeline only queued (found in
    review)."""
    from turbolock import LockClient

    key = key_prefix + "balance"
    blocking = redis.Redis(host=redis_server.host, port=redis_server.port)

    async def body() -> list[str]:
        awaited = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
        refused: list[str] = []
        try:
            for make in (lambda: FencedStore(awaited), lambda: AsyncFencedStore(blocking),
                         lambda: AsyncFencedStore(awaited.pipeline())):
                with pytest.raises(InvalidArgumentTypeError) as caught:
                    make()
                refused.append(str(caught.value))
        finally:
            await awaited.aclose()
        return refused

    try:
        refused = asyncio.run(body())
        assert "turbolock.asyncio.AsyncFencedStore" in refused[0] and "turbolock.FencedStore" in refused[1]
        with LockClient.from_url(redis_server.url, key_prefix=key_prefix) as lock_client:
            for wrong in (lock_client, redis_server.url, None, blocking.pipeline()):
                with pytest.raises(InvalidArgumentTypeError) as caught:
                    FencedStore(wrong)
                assert caught.value.argument == "redis"
        assert FencedStore(blocking).write(key, "100", 5) is True  # the right kind works
    finally:
        blocking.close()
    assert raw.hget(key, "value") == b"100"
