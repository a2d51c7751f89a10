"""close() right after a task's acquire was cancelled (its SET sent, its reply not in yet): the
lock its SET takes is released by close's last cleanup once the reply comes, within close's
deadline (found in review: close() returned at once and the lock stayed held by nobody for its
whole ttl, ``pending_cleanup`` 1; the cancelled call's future was done, so close did not wait
for its reply, and the reply came after the last cleanup)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


@pytest.mark.parametrize("call", ["try_acquire", "acquire_many"])
def test_close_after_a_cancelled_acquire_leaves_no_lock(own_server: RedisServer, core_name: str,
                                                         call: str) -> None:
    raw = redis.Redis.from_url(own_server.url)

    async def body() -> tuple[float, int]:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix="rv:", timeout=5)
        await client.query("warm")  # the connection is open
        own_server.pause()  # a slow server: the SET below is answered 0.3 s late
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, own_server.resume)
        try:
            if call == "try_acquire":
                task = asyncio.ensure_future(client.try_acquire("job", 30))
            else:
                task = asyncio.ensure_future(client.acquire_many(["job", "other"], 30))
            await asyncio.sleep(0.05)  # the SET went out
            task.cancel()  # e.g. a shutdown cancelling its tasks before closing the client
            await asyncio.gather(task, return_exceptions=True)
            began = time.monotonic()
            await client.close()  # 5 s deadline: plenty for a server that answers in 0.3 s
            took = time.monotonic() - began
        finally:
            own_server.resume()
        await asyncio.sleep(0.5)  # the server has run what it buffered
        return took, client.pending_cleanup

    took, pending = asyncio.run(body())
    assert took < 5.0, f"close() took {took:.2f}s of its 5 s deadline"
    ttl = raw.pttl("rv:job")
    raw.close()
    assert ttl == -2, (f"lock 'job' left held by nobody for {ttl} ms after close() returned in "
                       f"{took:.3f}s (pending_cleanup={pending})")


def test_close_after_a_cancelled_acquire_ends_by_its_deadline_if_the_server_never_answers(
        own_server: RedisServer, core_name: str) -> None:
    """close() waits for the cancelled acquire's reply no longer than its deadline (the call
    timeout, 0.5 s here): a server that never answers again leaves that lock to its ttl."""
    async def body() -> float:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix="rv:", timeout=0.5)
        await client.query("warm")
        own_server.pause()
        try:
            task = asyncio.ensure_future(client.try_acquire("job", 30))
            await asyncio.sleep(0.05)  # the SET went out
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            began = time.monotonic()
            await client.close()
            return time.monotonic() - began
        finally:
            own_server.resume()

    took = asyncio.run(body())
    assert took < 0.5 + 0.25, f"close() took {took:.2f}s with a 0.5 s deadline and a server never answering"
