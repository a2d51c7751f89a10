"""A server that refuses new connections (``maxclients`` reached) is reported as what it is: a
``ConnectionError`` naming the server's reason, the same on the threaded and the asyncio client,
and a blocking acquire goes on waiting through it (found by the fault suite, issue #16).

Redis writes ``-ERR max number of clients reached`` the moment it accepts a connection it cannot
keep, before reading anything, and hangs up. The threaded client read that as the reply to its
handshake's PING (a ``ResponseError``: a blocking acquire ended at once); the asyncio client got
it before its handshake left and reported a ``ProtocolError`` saying the address may not be a
Redis server at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from turbolock import ConnectionError, LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

TRIES = 20
"""Connections refused per client kind: the asyncio race went either way from one to the next."""
WAIT = 0.3


@pytest.fixture(params=FRONTS)
def make(request: pytest.FixtureRequest, own_server: RedisServer, core_name: str,
         key_prefix: str) -> Iterator[Callable[..., Any]]:
    url = own_server.url
    fronts = Fronts(request.param, partial(LockClient.from_url, url), partial(AsyncLockClient.from_url, url),
                    core=core_name, key_prefix=key_prefix, timeout=1.0, connect_timeout=1.0)
    yield fronts.make
    fronts.close()


@pytest.fixture
def full(own_server: RedisServer) -> Iterator[redis.Redis]:
    """The server at ``maxclients``: this connection is its only client; set back at the end."""
    admin = redis.Redis(host=own_server.host, port=own_server.port)
    admin.config_set("maxclients", 1)
    yield admin
    admin.config_set("maxclients", 10000)
    admin.close()


def test_a_refused_connection_is_a_connection_error(make: Callable[..., Any], full: redis.Redis) -> None:
    reasons = 0
    for _ in range(TRIES):
        client = make()
        with pytest.raises(ConnectionError) as raised:
            client.try_acquire("x", 5)
        assert type(raised.value) is ConnectionError, repr(raised.value)
        # The server closes with the handshake unread, so its kernel answers with a reset, which
        # can throw away the error line before the client reads it: only then is the reason missing.
        if "refused the connection" in str(raised.value):
            assert "max number of clients" in str(raised.value)
            reasons += 1
        client.close()
    assert reasons > 0, "the server's reason was never read"


def test_a_blocking_acquire_waits_through_refused_connections(make: Callable[..., Any],
                                                              full: redis.Redis) -> None:
    client = make()
    lock = client.lock("x", 5)
    started = time.monotonic()
    assert lock.acquire(timeout=WAIT) is False
    assert time.monotonic() - started >= WAIT - 0.05, "the wait ended before its time"
    full.config_set("maxclients", 10000)
    assert lock.acquire(timeout=WAIT) is True, "the server takes connections again"
    lock.release()
