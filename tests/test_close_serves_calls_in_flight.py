"""close() while other calls are under way serves them before it closes the connections, within
its own deadline: a release still waiting for a connection (threads: every connection busy) or
still waiting for its reply (asyncio) as another thread or task closes the client goes through,
and the lock is free at once. Both left the lock to its ttl (the release raised
ClientClosedError): the lease had left the renewer's book, so close's own release of renewed
locks did not see it (found in review)."""

from __future__ import annotations

import asyncio
import time

import redis

from _eventually import eventually
from _in_thread import InThread
from turbolock import ClientClosedError, ConnectionError, LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

T = 2.0
"""The client's call timeout: close()'s deadline."""
SLACK = 0.5


def test_a_release_waiting_for_a_connection_goes_out_before_close_closes(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    raw = redis.Redis(port=own_server.port)
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                                 max_connections=1)
    try:
        lease = client.try_acquire("job", 30, auto_renew=True)
        assert lease is not None
        busy = client._pool.get(time.monotonic() + T)  # the only connection, taken by "another call"
        releaser = InThread(lambda: client.release(lease))
        assert eventually(lambda: client._pool._waiters == 1, 2.0), "the release never waited"
        started = time.monotonic()
        closer = InThread(client.close)
        time.sleep(0.3)
        assert closer.is_alive(), "close() did not wait for the release queued for a connection"
        client._pool.put(busy)  # the other call is over
        closer.join(T + SLACK)
        released = releaser.join(T + SLACK)
        took = time.monotonic() - started
        assert not closer.is_alive() and not releaser.is_alive()
        assert released is True, released
        assert raw.exists(key_prefix + "job") == 0, "the lock was left to its ttl"
        assert took < T + SLACK, f"close() took {took:.2f}s"
    finally:
        client.close()
        raw.close()


def test_close_keeps_its_deadline_when_the_waiting_call_is_never_served(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.5,
                                 max_connections=1)
    busy = client._pool.get(time.monotonic() + 1)  # never given back before close ends
    lease = client.lease("job", b"0123456789abcdef")
    releaser = InThread(lambda: client.release(lease))
    assert eventually(lambda: client._pool._waiters == 1, 2.0)
    started = time.monotonic()
    client.close()
    took = time.monotonic() - started
    error = releaser.join(2)
    client._pool.put(busy)
    assert took < 0.5 + SLACK, f"close() took {took:.2f}s"
    assert isinstance(error, ConnectionError), error  # its own deadline, or the close: never a hang


def test_an_asyncio_release_in_flight_is_answered_before_close_closes(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    raw = redis.Redis(port=own_server.port)

    async def scenario() -> tuple[bool, object, float]:
        """Whether close() waited, what the release returned, how long close() took (asserted
        outside the event loop: a failure's traceback stays short)."""
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T)
        lease = await client.try_acquire("job", 30, auto_renew=True)
        own_server.pause()  # the release is written; its reply waits for the server
        try:
            releasing = asyncio.ensure_future(client.release(lease))  # type: ignore[arg-type]
            await asyncio.sleep(0.05)
            started = time.monotonic()
            closing = asyncio.ensure_future(client.close())
            await asyncio.sleep(0.3)
            waited = not closing.done()
        finally:
            own_server.resume()
        await asyncio.wait_for(closing, T + SLACK)
        took = time.monotonic() - started
        try:
            return waited, await releasing, took
        except Exception as exc:
            return waited, exc, took

    try:
        waited, outcome, took = asyncio.run(scenario())
        assert waited, f"close() did not wait for the release in flight; the release got {outcome!r}"
        assert outcome is True, repr(outcome)
        assert raw.exists(key_prefix + "job") == 0, "the lock was left to its ttl"
        assert took < T + SLACK, f"close() took {took:.2f}s"
    finally:
        raw.close()


def test_a_call_started_while_close_serves_the_waiting_ones_is_refused(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """It was served too (found in review): a lease from a client that said it was closed,
    neither renewed nor releasable, and one more call for close() to wait for."""
    raw = redis.Redis(port=own_server.port)
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T,
                                 max_connections=1)
    try:
        held = client.try_acquire("a", 30)
        assert held is not None
        busy = client._pool.get(time.monotonic() + T)
        releaser = InThread(lambda: client.release(held))
        assert eventually(lambda: client._pool._waiters == 1, 2.0)
        closer = InThread(client.close)
        assert eventually(lambda: client.closed, 2.0)
        late = InThread(lambda: client.try_acquire("b", 30)).join(T + SLACK)
        client._pool.put(busy)
        closer.join(T + SLACK)
        assert releaser.join(T + SLACK) is True
        assert isinstance(late, ClientClosedError), late
        assert raw.exists(key_prefix + "b") == 0, "a call on the closed client took a lock"
    finally:
        client.close()
        raw.close()


def test_an_asyncio_call_started_while_close_serves_the_calls_in_flight_is_refused(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    raw = redis.Redis(port=own_server.port)

    async def scenario() -> tuple[bool, object, object]:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T)
        held = await client.try_acquire("a", 30)
        own_server.pause()  # the release is written; its reply waits for the server
        try:
            releasing = asyncio.ensure_future(client.release(held))  # type: ignore[arg-type]
            await asyncio.sleep(0.05)
            closing = asyncio.ensure_future(client.close())
            await asyncio.sleep(0.2)
            serving = client.closed and not closing.done()
            late = asyncio.ensure_future(client.try_acquire("b", 30))
            await asyncio.sleep(0.1)
        finally:
            own_server.resume()
        await asyncio.wait_for(closing, T + SLACK)
        released, taken = await asyncio.gather(releasing, late, return_exceptions=True)
        return serving, released, taken

    try:
        serving, released, taken = asyncio.run(scenario())
        assert serving, "close() did not wait for the release in flight"
        assert released is True, repr(released)
        assert isinstance(taken, ClientClosedError), repr(taken)
        assert raw.exists(key_prefix + "b") == 0, "a call on the closed client took a lock"
    finally:
        raw.close()
