"""One Lock object shared by two threads (or tasks). The first is inside ``with lock``; its lock
expires and an ``extend`` in the block finds it lost (the object then holds nothing). The
second thread then takes the lock through the same object (``with lock``: it is unheld and the
key is free) and works inside its block. The first block's exit must leave the second's lock
alone and report its own loss (``LockNotOwnedError``). It released the *second* thread's lock
(it gave back whatever the object held then, not the lease its block entered with) and said
nothing to either block (found in review): each block now gives back its own lease
(``LockRules._blocks``, per thread or task)."""

from __future__ import annotations

import asyncio
import threading
import time

import redis

from turbolock import LockClient, LockNotOwnedError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

TTL = 0.2


def test_threads_first_block_exit_keeps_second_threads_lock(redis_server: RedisServer, core_name: str,
                                                            key_prefix: str, raw: redis.Redis) -> None:
    key = (key_prefix + "shared").encode()
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        lock = client.lock("shared", TTL, timeout=5)
        second_in = threading.Event()
        first_out = threading.Event()
        seen: dict[str, object] = {}

        def second() -> None:
            try:
                with lock:
                    seen["token_in"] = raw.get(key)
                    second_in.set()
                    first_out.wait(5)
                    seen["held_after_first_exit"] = raw.get(key) == seen["token_in"]
            except BaseException as exc:  # the outcome is what is tested
                seen["second_error"] = exc

        first_error: BaseException | None = None
        try:
            with lock:
                time.sleep(TTL + 0.2)  # the lock expires under the first block
                try:
                    lock.extend()
                except LockNotOwnedError:
                    pass  # the block learns it lost the lock; the object holds nothing now
                worker = threading.Thread(target=second)
                worker.start()
                assert second_in.wait(5), seen
        except BaseException as exc:  # the outcome is what is tested
            first_error = exc
        first_out.set()
        worker.join(10)
        assert seen.get("held_after_first_exit") is True, (
            f"the first block's exit released the second thread's lock: {seen}, first: {first_error!r}")
        assert isinstance(first_error, LockNotOwnedError), first_error


def test_tasks_first_block_exit_keeps_second_tasks_lock(redis_server: RedisServer, core_name: str,
                                                        key_prefix: str, raw: redis.Redis) -> None:
    key = (key_prefix + "shared").encode()

    async def main() -> tuple[dict[str, object], BaseException | None]:
        url = redis_server.url
        async with AsyncLockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
            lock = client.lock("shared", TTL, timeout=5)
            second_in = asyncio.Event()
            first_out = asyncio.Event()
            seen: dict[str, object] = {}

            async def second() -> None:
                try:
                    async with lock:
                        seen["token_in"] = raw.get(key)
                        second_in.set()
                        await first_out.wait()
                        seen["held_after_first_exit"] = raw.get(key) == seen["token_in"]
                except BaseException as exc:  # the outcome is what is tested
                    seen["second_error"] = exc

            first_error: BaseException | None = None
            task = None
            try:
                async with lock:
                    await asyncio.sleep(TTL + 0.2)
                    try:
                        await lock.extend()
                    except LockNotOwnedError:
                        pass
                    task = asyncio.create_task(second())
                    await asyncio.wait_for(second_in.wait(), 5)
            except BaseException as exc:  # the outcome is what is tested
                first_error = exc
            first_out.set()
            assert task is not None
            await asyncio.wait_for(task, 10)
            return seen, first_error

    seen, first_error = asyncio.run(main())
    assert seen.get("held_after_first_exit") is True, (
        f"the first block's exit released the second task's lock: {seen}, first: {first_error!r}")
    assert isinstance(first_error, LockNotOwnedError), first_error
