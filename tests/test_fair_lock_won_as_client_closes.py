"""close() racing a fair acquire whose attempt takes the lock. Close makes every queued fair
waiter leave its queue, and that leave (``FAIR_LEAVE``) deletes the lock its waiter holds; a
waiter whose winning attempt was answered but not yet seen by its flow returned True all the
same, with a lease for a lock gone from the server: another client took it, two holders at once
(found in review). Now a waiter that close made leave does not keep a lock it takes: its
acquire raises ``ClientClosedError`` (the README: locks an acquire took as the client closed
are neither renewed nor released by it).

The race is made deterministic by holding the waiter for the whole of close() right after its
winning attempt's reply was read (threads: as a descheduled thread would be; asyncio: close
runs while the attempt's reply is on its way)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import redis

from turbolock import LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.errors import ClientClosedError
from turbolock.lease import Lease
from turbolock.redis_server import RedisServer


def test_threads(redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as other:
        client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
        held = other.try_acquire("race", 30)
        assert held is not None
        real = client._fair_attempt
        closed: list[threading.Thread] = []

        def attempt(*args: Any) -> object:
            got = real(*args)
            if isinstance(got, Lease):  # answered: the lock is this waiter's on the server
                closer = threading.Thread(target=client.close, daemon=True)
                closer.start()
                closer.join(10)
                closed.append(closer)
            return got

        client._fair_attempt = attempt  # type: ignore[method-assign,assignment]
        threading.Timer(0.3, lambda: other.release(held)).start()
        with pytest.raises(ClientClosedError):
            client.lock("race", 30, fair=True).acquire(timeout=5)
        assert closed and not closed[0].is_alive()
        # The waiter's lock went with close's leave: nobody believes they hold it.
        assert raw.get(key_prefix + "race") is None
        assert other.try_acquire("race", 30) is not None


def test_asyncio(redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as other:
            client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
            held = await other.try_acquire("race", 30)
            assert held is not None
            real = client._fair_attempt
            closed: list[bool] = []

            async def attempt(*args: Any) -> object:
                got = await real(*args)
                if isinstance(got, Lease):
                    await client.close()
                    closed.append(True)
                return got

            client._fair_attempt = attempt  # type: ignore[method-assign,assignment]
            asyncio.get_running_loop().call_later(0.3, lambda: asyncio.ensure_future(other.release(held)))
            with pytest.raises(ClientClosedError):
                await client.lock("race", 30, fair=True).acquire(timeout=5)
            assert closed
            assert raw.get(key_prefix + "race") is None
            assert await other.try_acquire("race", 30) is not None

    asyncio.run(body())
