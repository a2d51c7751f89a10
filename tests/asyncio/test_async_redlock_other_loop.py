"""An AsyncRedlockClient whose masters' connections belong to an event loop still running in
another thread is refused in this one with LockUsageError, as the single-server client is
(test_async_event_loops.py), and the other loop's lease is untouched; once that loop is
closed, this one takes the client over. (The fan-out now moves each pool to the running loop,
or is refused, before it starts any connect.)"""

from __future__ import annotations

import asyncio
import threading

import pytest

from turbolock import LockUsageError
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the loops' rule: no core's own


def test_a_redlock_client_of_a_loop_running_in_another_thread_is_refused(
        three: list[RedisServer], core_name: str, key_prefix: str) -> None:
    client = AsyncRedlockClient([server.url for server in three], core=core_name, key_prefix=key_prefix)
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, name="other-loop", daemon=True)
    thread.start()
    try:
        lease = asyncio.run_coroutine_threadsafe(client.try_acquire("theirs", 30), other).result(10)
        assert lease is not None

        async def here() -> None:
            with pytest.raises(LockUsageError, match="another event loop"):
                await client.try_acquire("mine", 30)

        asyncio.run(here())
        assert asyncio.run_coroutine_threadsafe(client.release(lease), other).result(10)
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(10)
        other.close()

    async def after() -> None:
        mine = await client.try_acquire("mine", 30)
        assert mine is not None and await client.release(mine)
        await client.close()

    asyncio.run(after())
