"""``FencedStore`` and ``AsyncFencedStore`` run on the caller's redis-py client, so their calls are
bounded by that client's ``socket_timeout`` and retry policy (redis-py 8 retries a timeout three
times by default, with backoff: a stopped server then holds each call about ten seconds here).
With retries off and the resource's server stopped (SIGSTOP), a read, a write and a batch of
writes each raise redis-py's TimeoutError within the socket timeout, threads and asyncio. (What
was sent may still apply once the server resumes: a timed-out call's outcome is unknown, as for
any redis-py command; a fenced write applied late is still refused if a newer fence came.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from turbolock import FencedStore
from turbolock.asyncio import AsyncFencedStore
from turbolock.redis_server import RedisServer

TIMEOUT = 0.5

CALLS: dict[str, Callable[[Any, str], Any]] = {
    "read": lambda store, key: store.read(key, 1),
    "write": lambda store, key: store.write(key, "v", 1),
    "write_many": lambda store, key: store.write_many([(key, "v", 1), (key + ":2", "w", 1)]),
}


@pytest.mark.parametrize("front", ["threads", "asyncio"])
@pytest.mark.parametrize("call", list(CALLS))
def test_a_store_call_to_a_stopped_server_ends_within_the_clients_timeout(
        own_server: RedisServer, key_prefix: str, front: str, call: str) -> None:
    key = key_prefix + "balance"
    if front == "threads":
        client = redis.Redis(host=own_server.host, port=own_server.port, socket_timeout=TIMEOUT,
                             retry=Retry(NoBackoff(), 0))
        store: Any = FencedStore(client)
        CALLS["read"](store, key + ":warm")  # scripts loaded, connection open
        run: Callable[[], Any] = lambda: CALLS[call](store, key)  # noqa: E731
    else:
        async def on_loop(body: Callable[[Any], Awaitable[Any]]) -> Any:
            aclient = redis.asyncio.Redis(host=own_server.host, port=own_server.port, socket_timeout=TIMEOUT,
                                          retry=AsyncRetry(NoBackoff(), 0))
            try:
                astore = AsyncFencedStore(aclient)
                await astore.read(key + ":warm", 1)
                return await body(astore)
            finally:
                await aclient.aclose()

        run = lambda: asyncio.run(on_loop(lambda astore: CALLS[call](astore, key)))  # noqa: E731
    own_server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(redis.exceptions.TimeoutError):
            run()
        took = time.monotonic() - started
    finally:
        own_server.resume()
    assert took < TIMEOUT + 0.5, f"{call} took {took:.2f} s with a {TIMEOUT} s socket timeout"
