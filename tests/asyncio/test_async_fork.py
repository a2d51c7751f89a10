"""A forked child using an AsyncLockClient made in the parent can neither release nor renew the
parent's locks (using them raises, as on the threaded client), and its own calls leave the
parent's connection alone. Found in review: the child's release deleted the parent's lock, and
its first call, closing the inherited connections through the parent's loop, unregistered the
parent's socket from the epoll instance both share (the parent's next call timed out)."""

from __future__ import annotations

import asyncio
import os
import select
import time
import traceback

import pytest
import redis

from turbolock import InvalidArgumentError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


def _wait_for_child(pid: int, read_fd: int, limit: float = 30.0) -> str:
    deadline = time.monotonic() + limit
    chunks = []
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, 9)
                raise AssertionError("the forked child did not finish")
            readable, _, _ = select.select([read_fd], [], [], remaining)
            if readable:
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    return b"".join(chunks).decode()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_cannot_release_the_parents_async_lease(redis_server: RedisServer, core_name: str,
                                                             key_prefix: str) -> None:
    client = AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    lease = asyncio.run(client.try_acquire("parent", 60))  # the loop is closed when it returns
    assert lease is not None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read_fd)
            try:
                released = asyncio.run(client.release(lease))
                message = f"the child's release of the parent's lease returned {released!r}"
            except InvalidArgumentError as exc:
                message = "ok" if "another process" in str(exc) else f"wrong error: {exc}"
        except BaseException:
            message = traceback.format_exc()
        finally:
            try:
                os.write(write_fd, message.encode())
            finally:
                os._exit(0)
    os.close(write_fd)
    message = _wait_for_child(pid, read_fd)
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
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its own calls, on a loop of its own
            try:
                os.close(read_fd)
                info = asyncio.run(client.query("other"))
                message = "ok" if not info.held else f"unexpected {info!r}"
            except BaseException:
                message = traceback.format_exc()
            finally:
                try:
                    os.write(write_fd, message.encode())
                finally:
                    os._exit(0)
        os.close(write_fd)
        _wait_for_child(pid, read_fd)
        started = time.monotonic()
        info = loop.run_until_complete(client.query("parent"))  # the parent's own connection
        assert info.held and time.monotonic() - started < 0.5
    finally:
        loop.run_until_complete(client.close())
        loop.close()
