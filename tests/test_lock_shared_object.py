"""One Lock object shared by two threads (or two asyncio tasks), both waiting to enter it: the
first in outlives its ttl inside the block, the other then takes the lock on the server. That
second acquire is a usage error (a Lock object is held once at a time), its lock given back at
once, and it never enters; the first block's exit reports its own loss. Found in review: the
second lease replaced the first, which released it on exit, the second body still running."""

from __future__ import annotations

import asyncio
import threading
import time

import redis

from turbolock import LockClient, LockNotOwnedError, LockUsageError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

TTL = 0.3
INSIDE = 1.0
"""How long the first block works: past its ttl, so the other waiter takes the lock."""


def _outcome(exits: dict[str, BaseException | None], entered: list[str]) -> None:
    assert len(entered) == 1, f"both blocks ran: {entered}"
    (inside,) = entered
    (outside,) = set(exits) - {inside}
    assert isinstance(exits[outside], LockUsageError), exits
    assert isinstance(exits[inside], LockNotOwnedError), exits


def _eventually_free(raw: redis.Redis, key: bytes) -> None:
    deadline = time.monotonic() + 5
    while raw.exists(key) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not raw.exists(key), "the second acquire's lock was left held"


def test_threads_sharing_a_lock_object(redis_server: RedisServer, core_name: str, key_prefix: str,
                                       raw: redis.Redis) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        holder = client.try_acquire("shared", 30)
        assert holder is not None
        lock = client.lock("shared", TTL, timeout=10)
        entered: list[str] = []
        exits: dict[str, BaseException | None] = {}

        def block(name: str) -> None:
            try:
                with lock:
                    entered.append(name)
                    time.sleep(INSIDE)
            except BaseException as exc:  # the outcome is what is tested
                exits[name] = exc
            else:
                exits[name] = None

        threads = [threading.Thread(target=block, args=(name,)) for name in ("a", "b")]
        for thread in threads:
            thread.start()
        time.sleep(0.3)  # both wait on the object
        assert client.release(holder)
        for thread in threads:
            thread.join(10)
        _outcome(exits, entered)
        _eventually_free(raw, (key_prefix + "shared").encode())


def test_tasks_sharing_a_lock_object(redis_server: RedisServer, core_name: str, key_prefix: str,
                                     raw: redis.Redis) -> None:
    async def main() -> tuple[dict[str, BaseException | None], list[str]]:
        url = redis_server.url
        async with AsyncLockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
            holder = await client.try_acquire("shared", 30)
            assert holder is not None
            lock = client.lock("shared", TTL, timeout=10)
            entered: list[str] = []
            exits: dict[str, BaseException | None] = {}

            async def block(name: str) -> None:
                try:
                    async with lock:
                        entered.append(name)
                        await asyncio.sleep(INSIDE)
                except BaseException as exc:  # the outcome is what is tested
                    exits[name] = exc
                else:
                    exits[name] = None

            tasks = [asyncio.create_task(block(name)) for name in ("a", "b")]
            await asyncio.sleep(0.3)
            assert await client.release(holder)
            await asyncio.wait(tasks, timeout=10)
            deadline = time.monotonic() + 5
            while client.pending_cleanup and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            return exits, entered

    exits, entered = asyncio.run(main())
    _outcome(exits, entered)
    _eventually_free(raw, (key_prefix + "shared").encode())
