"""A process forked while its parent's event loop (in another thread) runs ``close()`` of an
asyncio client: the parent's close is the parent's, the child's client is open and whole, as the
threaded clients' (tests/test_fork_during_close.py). An AsyncRedlockClient was closed outright in
the child; an AsyncLockClient's auto-renewed acquire raised ClientClosedError after taking the
lock, left held by nobody. Found in review. Several OS processes (os.fork), C core (the same
at-fork code on both)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from _forking import in_forked_child
from turbolock.asyncio import AsyncLockClient, AsyncRedlockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)


async def _attempt(client: object, name: str) -> str:
    try:
        lease = await client.try_acquire(name, 10)  # type: ignore[attr-defined]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok" if lease is not None else "None"


def _loop_in_thread() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return loop, thread


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_a_child_forked_during_an_async_redlock_close_has_an_open_client(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)
    client = AsyncRedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix,
                                node_timeout=2.0)
    loop, thread = _loop_in_thread()
    try:
        lease = asyncio.run_coroutine_threadsafe(client.try_acquire("renewed", 30, auto_renew=True),
                                                 loop).result(10)
        assert lease is not None
        for server in servers:
            server.pause()  # close() waits on its release of the renewed lock
        closing = asyncio.run_coroutine_threadsafe(client.close(), loop)
        try:
            time.sleep(0.3)

            def work() -> str:
                time.sleep(0.5)  # the parent resumes the servers meanwhile
                return asyncio.run(_attempt(client, "plain"))

            def resume() -> None:
                for server in servers:
                    server.resume()

            reported = in_forked_child(work, resume)
        finally:
            for server in servers:
                server.resume()
        closing.result(10)
        assert reported == "ok", reported
    finally:
        _stop(loop, thread)


def test_a_child_forked_during_an_async_close_can_take_an_auto_renewed_lock(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """The asyncio twin of tests/test_fork_during_close.py's first test (fixed for LockClient,
    whose ``_forget_parent_locks`` clears ``_renewals_stopped``; ``AsyncLockClient``'s does not, nor
    ``_closed``): the child's auto-renewed acquire takes the lock, then raises ClientClosedError
    ("closed while the acquire ran"), and the lock stays held by nobody until its ttl."""
    import redis
    client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=3.0)
    loop, thread = _loop_in_thread()
    raw = redis.Redis(host=own_server.host, port=own_server.port)
    try:
        lease = asyncio.run_coroutine_threadsafe(client.try_acquire("renewed", 30, auto_renew=True),
                                                 loop).result(10)
        assert lease is not None
        own_server.pause()  # close() waits on its release of the renewed lock
        closing = asyncio.run_coroutine_threadsafe(client.close(), loop)
        try:
            time.sleep(0.3)

            async def child() -> str:
                try:
                    taken = await client.try_acquire("child-renewed", 10, auto_renew=True)
                except Exception as exc:
                    return f"closed={client.closed} {type(exc).__name__}: {exc}"
                return f"closed={client.closed} {'ok' if taken is not None else 'None'}"

            def work() -> str:
                time.sleep(0.5)  # the parent resumes the server meanwhile
                return asyncio.run(child())

            reported = in_forked_child(work, own_server.resume)
        finally:
            own_server.resume()
        closing.result(10)
        left = raw.pttl(key_prefix + "child-renewed")
        assert reported == "closed=False ok", f"{reported} (the child's lock left for {left} ms)"
    finally:
        raw.close()
        _stop(loop, thread)
