"""A closed client: a blocking acquire on it (or one whose client is closed under it) ends at
once with ``ClientClosedError``, as a single attempt does; it retried that like a server not
answering, waited out its whole timeout and then said False ("someone holds it") of a free
lock. An acquire that took its locks as the client closed says so honestly: they are neither
renewed nor released by a closed client, and expire by their ttl (the renewer's refusal was an
``InvalidArgumentError``, documented as raised before anything is sent; asyncio's error promised
a release in the background that a closed client never makes)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _blocking_async import close_only
from _in_thread import InThread
from turbolock import ClientClosedError, LockClient, OutcomeUnknownError, UnsentTimeoutError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

WAIT = 1.5
TTL = 1


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_blocking_acquire_on_a_closed_client_fails_at_once(make_client: Callable[..., Any],
                                                             fair: bool) -> None:
    client = make_client()
    assert client.query("free").held is False
    close_only(client)
    with pytest.raises(ClientClosedError, match="closed"):
        client.lock("free", 5, fair=fair).acquire(timeout=0)
    started = time.monotonic()
    with pytest.raises(ClientClosedError, match="closed"):
        client.lock("free", 5, fair=fair).acquire(timeout=WAIT)
    assert time.monotonic() - started < 0.5


def test_every_bulk_call_on_a_closed_client_raises_even_with_nothing_to_send(
        make_client: Callable[..., Any]) -> None:
    """An empty bulk call on a closed client returned an empty result (nothing to send, so the
    closed pool was never asked), where the Redlock client raised: a use after close went unseen."""
    client = make_client()
    lease = client.try_acquire("closing", 30)
    assert lease is not None and client.release(lease)
    close_only(client)
    calls: dict[str, Callable[[], object]] = {
        "acquire_many": lambda: client.acquire_many([], 10),
        "acquire_many(limit)": lambda: client.acquire_many([], 10, limit=1),
        "release_many": lambda: client.release_many([]),
        "extend_many": lambda: client.extend_many([], 10),
        "query_many": lambda: client.query_many([]),
        "release_many(lease)": lambda: client.release_many([lease]),
    }
    for name, call in calls.items():
        with pytest.raises(ClientClosedError):
            call()
            pytest.fail(f"{name} on a closed client did not raise")


def test_a_waiter_whose_client_is_closed_under_it_stops_waiting(client: Any) -> None:
    assert client.try_acquire("held", 30) is not None
    lock = client.lock("held", 30)
    waiter = InThread(lambda: lock.acquire(timeout=5))
    time.sleep(0.3)
    client.close()
    waiter.join(1.5)
    stuck = waiter.is_alive()
    outcome = waiter.join(10)
    assert not stuck, f"the waiter went on for its whole 5 s wait after close(): {outcome!r}"
    assert isinstance(outcome, ClientClosedError), outcome


def _held(raw: redis.Redis, prefix: str) -> int:
    return sum(1 for _ in raw.scan_iter(match=prefix + "n*", count=1000))


def test_close_during_a_renewed_bulk_acquire_says_its_locks_expire(own_server: RedisServer, core_name: str,
                                                                   key_prefix: str) -> None:
    raw = redis.Redis(port=own_server.port)
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=2.0)
    try:
        warm = client.try_acquire("warm", 10, auto_renew=True)  # the renewer exists
        assert warm is not None and client.release(warm)
        own_server.pause()
        try:
            worker = InThread(lambda: client.acquire_many([f"n{i}" for i in range(10)], TTL, auto_renew=True))
            time.sleep(0.2)  # written; its reply waits for the server
            closer = threading.Thread(target=client.close)
            closer.start()
            time.sleep(0.2)
        finally:
            own_server.resume()
        result = worker.join(10)
        closer.join(10)
        assert isinstance(result, ClientClosedError), result
        assert "expire by their ttl" in str(result)
        assert _held(raw, key_prefix) == 10
        time.sleep(TTL + 0.2)
        assert _held(raw, key_prefix) == 0
    finally:
        own_server.resume()
        client.close()
        raw.close()


def test_close_during_an_asyncio_bulk_acquire_promises_no_release(own_server: RedisServer, core_name: str,
                                                                  key_prefix: str) -> None:
    """close() lets the acquire in flight have its reply (see test_close_serves_calls_in_flight),
    and the acquire says its locks expire by their ttl, as the threads' does."""
    async def main() -> BaseException | None:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=2.0)
        assert await client.query("warm-up") is not None
        own_server.pause()
        try:
            acquiring = asyncio.ensure_future(client.acquire_many([f"n{i}" for i in range(10)], TTL,
                                                                  auto_renew=True))
            await asyncio.sleep(0.2)
            closing = asyncio.ensure_future(client.close())
            await asyncio.sleep(0.2)
        finally:
            own_server.resume()
        await asyncio.wait([acquiring, closing], timeout=10)
        return acquiring.exception()

    try:
        error = asyncio.run(main())
        assert isinstance(error, ClientClosedError), error
        assert "in the background" not in str(error) and "expire by their ttl" in str(error)
    finally:
        own_server.resume()


@pytest.mark.parametrize("close", ["whole", "cut short"])
@pytest.mark.parametrize("call", ["try_acquire", "acquire_many", "release_many"])
def test_close_while_an_asyncio_call_waits_for_a_connection_raises_client_closed(
        own_server: RedisServer, core_name: str, key_prefix: str, call: str, close: str) -> None:
    """A close() cut short cancels the connect under way; a call waiting for it got that
    CancelledError, as if its own task had been cancelled (found by review). A whole close()
    waits for the connect (the call may be a release), and the call ends by its own deadline."""
    async def scenario() -> BaseException | object:
        client = AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix,
                                          timeout=1.0, connect_timeout=1.0)
        own_server.pause()  # the kernel accepts the connect; the handshake waits
        try:
            if call == "try_acquire":
                task = asyncio.ensure_future(client.try_acquire("x", 10))
            elif call == "acquire_many":
                task = asyncio.ensure_future(client.acquire_many(["a", "b"], 10))
            else:
                task = asyncio.ensure_future(client.release_many([client.lease("a", b"0123456789abcdef")]))
            await asyncio.sleep(0.3)
            assert not task.done()
            if close == "whole":
                await client.close()
            else:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(client.close(), 0.2)
            try:
                return await asyncio.wait_for(task, 5)
            except BaseException as exc:  # what the call ended with is what is checked
                return exc
        finally:
            own_server.resume()

    outcome = asyncio.run(scenario())
    expected = ClientClosedError if close == "cut short" else UnsentTimeoutError
    assert isinstance(outcome, expected), repr(outcome)


def test_a_release_whose_reply_is_lost_as_another_thread_closes_says_it_is_not_retried(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """It said "it will be retried" (OutcomeUnknownError), but close() had stopped the cleaner and
    run its last cleanup: nothing retried it, and the lock stayed held for its whole ttl (found in
    review). It says the lock expires by its ttl now, as a lost acquire's error does."""
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.5)
    lease = client.try_acquire("job", 30)
    assert lease is not None
    own_server.pause()  # the release is written, its reply never comes in time
    try:
        releaser = InThread(lambda: client.release(lease))
        time.sleep(0.1)
        client.close()  # by another thread, meanwhile
        releaser.join(5)
    finally:
        own_server.resume()
    time.sleep(1.0)  # room for any retry that would come
    left = redis.Redis(port=own_server.port).pttl(key_prefix + "job")
    error = releaser.outcome
    assert isinstance(error, OutcomeUnknownError), error
    if left > 0:
        assert "not retried, it expires by its ttl" in str(error), (
            f"told {error}, yet the client is closed and the lock is still held for {left} ms")
