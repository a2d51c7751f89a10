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

from _closing import CloseBesideRelease, close_beside_release
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

    async def scenario() -> CloseBesideRelease:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T)
        lease = await client.try_acquire("job", 30, auto_renew=True)
        return await close_beside_release(client, lease, own_server, T + SLACK)

    try:
        seen = asyncio.run(scenario())  # asserted outside the event loop: a failure's traceback stays short
        assert seen.waited, f"close() did not wait for the release in flight: {seen.released!r}"
        assert seen.released is True, repr(seen.released)
        assert raw.exists(key_prefix + "job") == 0, "the lock was left to its ttl"
        assert seen.took < T + SLACK, f"close() took {seen.took:.2f}s"
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

    async def scenario() -> CloseBesideRelease:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=T)
        held = await client.try_acquire("a", 30)
        return await close_beside_release(client, held, own_server, T + SLACK,
                                          lambda: client.try_acquire("b", 30))

    try:
        seen = asyncio.run(scenario())
        assert seen.waited, "close() did not wait for the release in flight"
        assert seen.released is True, repr(seen.released)
        assert isinstance(seen.late, ClientClosedError), repr(seen.late)
        assert raw.exists(key_prefix + "b") == 0, "a call on the closed client took a lock"
    finally:
        raw.close()
