"""``FencedStore`` for asyncio: the same fenced reads and writes (``turbolock.fencing``) through
``redis.asyncio``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError

from turbolock.fencing import (
    READ,
    WRITE,
    Fence,
    pipelines_scripts,
    read_call,
    read_result,
    store_client,
    write_call,
    write_calls,
    write_many_result,
)


class AsyncFencedStore:
    """Values guarded by fences, in a Redis reached through ``redis`` (a ``redis.asyncio.Redis``):
    ``FencedStore``'s calls as coroutines."""

    def __init__(self, redis: Any) -> None:
        self.redis = store_client(redis, awaited=True)
        self._read = redis.register_script(READ)
        self._write = redis.register_script(WRITE)

    async def read(self, key: str | bytes, fence: Fence) -> bytes | None:
        """The value of ``key`` (None if never written), recording ``fence`` as seen;
        ``StaleFenceError`` when a higher fence has been seen."""
        keys, args = read_call(key, fence)
        return read_result(await self._read(keys=keys, args=args), key, fence)

    async def write(self, key: str | bytes, value: str | bytes | int, fence: Fence) -> bool:
        """Write ``value`` unless a higher fence has been seen on ``key``: whether it was written."""
        keys, args = write_call(key, value, fence)
        return bool(await self._write(keys=keys, args=args))

    async def write_many(self, items: Sequence[tuple[str | bytes, str | bytes | int, Fence]]) -> list[bool]:
        """``write`` for each (key, value, fence), pipelined; whether each was written.
        ``FencedWriteError`` when the server refused some (their keys in ``names``, ``written``
        saying which of the others went through)."""
        calls = write_calls(items)
        if not pipelines_scripts(self.redis):
            replies: list[Any] = []
            for keys, args in calls:
                try:
                    replies.append(await self._write(keys=keys, args=args))
                except ResponseError as exc:  # a refusal, as a pipeline gives it (``refused_or``)
                    replies.append(exc)
            return write_many_result(replies, calls)
        async with self.redis.pipeline(transaction=False) as pipe:
            for keys, args in calls:
                await self._write(keys=keys, args=args, client=pipe)
            return write_many_result(await pipe.execute(raise_on_error=False), calls)
