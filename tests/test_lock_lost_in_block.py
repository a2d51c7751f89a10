"""A with block whose lock an extend() found lost (the body caught the error and carried on)
ends with LockNotOwnedError, as the README says of a lock lost in the block. Found in review:
it ended with LockUsageError, "released inside its with block", which nobody had done."""

from __future__ import annotations

import asyncio
import time

import pytest

from turbolock import LockClient, LockNotOwnedError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


def test_threads(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        with pytest.raises(LockNotOwnedError):
            with client.lock("lost-by-extend", 0.1) as lock:
                time.sleep(0.3)  # the lock expires
                try:
                    lock.extend(1)
                except LockNotOwnedError:
                    pass  # noted; the block finishes its (now unprotected) work


def test_asyncio(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    async def main() -> None:
        url = redis_server.url
        async with AsyncLockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
            with pytest.raises(LockNotOwnedError):
                async with client.lock("lost-by-extend", 0.1) as lock:
                    await asyncio.sleep(0.3)
                    try:
                        await lock.extend(1)
                    except LockNotOwnedError:
                        pass

    asyncio.run(main())
