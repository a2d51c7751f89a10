"""A closed RedlockClient: a blocking acquire stops at once with ``ClientClosedError``, as on the
single-server client (tests/test_closed_client.py). The masters raised it, but the Redlock
attempt folded it into a no-quorum result its wait retried: a wait with a timeout ran the whole
of it, one without never ended (found by review)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from turbolock import ClientClosedError, RedlockClient
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("wait", [2.0, None], ids=["timeout", "endless"])
def test_a_blocking_redlock_acquire_on_a_closed_client_stops_at_once(
        three: list[RedisServer], core_name: str, key_prefix: str, wait: float | None) -> None:
    client = RedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
    assert client.query("free") is not None
    client.close()
    box: dict[str, Any] = {}

    def acquire() -> None:
        started = time.monotonic()
        try:
            box["result"] = client.lock("free", 5).acquire(timeout=wait)
        except BaseException as exc:
            box["result"] = exc
        box["took"] = time.monotonic() - started

    thread = threading.Thread(target=acquire, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "the blocking acquire on the closed Redlock client still waits after 5 s"
    assert box["took"] < 0.5 and isinstance(box["result"], ClientClosedError), box


def test_a_blocking_async_redlock_acquire_on_a_closed_client_stops_at_once(
        three: list[RedisServer], core_name: str, key_prefix: str) -> None:
    async def main() -> tuple[object, float]:
        client = AsyncRedlockClient([s.url for s in three], core=core_name, key_prefix=key_prefix)
        assert await client.query("free") is not None
        await client.close()
        started = time.monotonic()
        try:
            result: object = await client.lock("free", 5).acquire(timeout=2.0)
        except BaseException as exc:
            result = exc
        return result, time.monotonic() - started

    result, took = asyncio.run(main())
    assert took < 0.5 and isinstance(result, ClientClosedError), (result, took)
