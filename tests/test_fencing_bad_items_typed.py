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
