"""A forked child using an AsyncLockClient made in the parent can neither release nor renew the
parent's locks (using them raises, as on the threaded client), and its own calls leave the
parent's connection alone. Found in review: the child's release deleted the parent's lock, and
its first call, closing the inherited connections through the parent's loop, unregistered the
parent's socket from the epoll instance both share (the parent's next call timed out)."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
import redis

from _forking import in_forked_child
from turbolock import InvalidArgumentError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_cannot_release_the_parents_async_lease(redis_server: RedisServer, core_name: str,
                                                             key_prefix: str) -> None:
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    lease = asyncio.run(client.try_acquire("parent", 60))  # the loop is closed when it returns
    assert lease is not None
    def child() -> str:
        try:
            released = asyncio.run(client.release(lease))
        except InvalidArgumentError as exc:
            return "ok" if "another process" in str(exc) else f"wrong error: {exc}"
        return f"the child's release of the parent's lease returned {released!r}"

    message = in_forked_child(child)
    try:
        assert raw.get(key_prefix.encode() + b"parent") == lease.token, "the parent's lock was deleted"
        assert message == "ok", message
    finally:
        asyncio.run(client.close())
        raw.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_using_the_async_client_leaves_the_parents_connection_alone(
        redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix, timeout=2)
    loop = asyncio.new_event_loop()  # the parent's loop: idle between its calls, not closed
    try:
        lease = loop.run_until_complete(client.try_acquire("parent", 60))
        assert lease is not None
        def child() -> str:  # its own calls, on a loop of its own
            info = asyncio.run(client.query("other"))
            return "ok" if not info.held else f"unexpected {info!r}"

        assert in_forked_child(child) == "ok"
        started = time.monotonic()
        info = loop.run_until_complete(client.query("parent"))  # the parent's own connection
        assert info.held and time.monotonic() - started < 0.5
    finally:
        loop.run_until_complete(client.close())
        loop.close()
