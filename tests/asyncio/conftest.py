"""Fixtures for the asyncio client: an event loop per test (asyncio, and uvloop when installed),
and clients on both cores against the real servers of ``tests/conftest.py``.

Tests are plain functions that hand a coroutine function to ``arun``: no plugin needed. ``arun``
also fails a test that leaves a task of its own running (a stuck future, a forgotten task).
This directory has no ``__init__.py`` on purpose: a package called ``asyncio`` would shadow
the standard library's for pytest's import machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from async_helpers import LOOPS, Runner, run_in_new_loop

from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer


@pytest.fixture(params=LOOPS)
def loop_name(request: pytest.FixtureRequest) -> str:
    """asyncio's own loop, and uvloop when it is installed."""
    return str(request.param)


@pytest.fixture
def arun(loop_name: str) -> Runner:
    """``arun(coroutine_function)``: run it in a fresh loop of the parametrised kind."""
    return lambda body: run_in_new_loop(loop_name, body)


@pytest.fixture
def arun_asyncio() -> Runner:
    """Like ``arun``, on asyncio's own loop only (tests that look inside its transports)."""
    return lambda body: run_in_new_loop("asyncio", body)


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def new_client(url: str, core_name: str, key_prefix: str) -> Callable[..., AsyncLockClient]:
    """``new_client(**kwargs)``: an AsyncLockClient on the shared server, this test's prefix and core."""
    def make(**kwargs: Any) -> AsyncLockClient:
        kwargs.setdefault("core", core_name)
        kwargs.setdefault("key_prefix", key_prefix)
        return AsyncLockClient.from_url(kwargs.pop("url", url), **kwargs)

    return make


@pytest.fixture
def own_raw(own_server: RedisServer) -> Iterator[redis.Redis]:
    connection = redis.Redis(host=own_server.host, port=own_server.port)
    yield connection
    connection.close()


# -- Redlock over several masters (test_async_redlock_*.py) -----------------------------------------


def _start_masters(count: int) -> list[RedisServer]:
    servers: list[RedisServer] = []
    try:
        for _ in range(count):
            servers.append(RedisServer().start())
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


@pytest.fixture(scope="session")
def session_masters() -> Iterator[list[RedisServer]]:
    """Five servers shared by the session's asyncio Redlock tests (the first 3 or all 5 are used);
    tests keep apart by key prefix. A test that pauses one resumes it before it ends."""
    servers = _start_masters(5)
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(params=[3, 5], ids=["n3", "n5"])
def masters(request: pytest.FixtureRequest, session_masters: list[RedisServer]) -> list[RedisServer]:
    """The first 3 or all 5 session masters (parametrised)."""
    count: int = request.param
    return session_masters[:count]


@pytest.fixture
def three(session_masters: list[RedisServer]) -> list[RedisServer]:
    return session_masters[:3]


@pytest.fixture
def own_masters() -> Iterator[Callable[[int], list[RedisServer]]]:
    """``own_masters(n)``: n servers for this test alone, to stop and restart."""
    started: list[RedisServer] = []

    def make(count: int) -> list[RedisServer]:
        servers = _start_masters(count)
        started.extend(servers)
        return servers

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def make_async_redlock(core_name: str, key_prefix: str) -> Iterator[Callable[..., Any]]:
    """``make_async_redlock(masters, **options)``: an AsyncRedlockClient on this test's core and key
    prefix; ``masters`` may hold RedisServers (their URLs are used), URLs and AsyncLockClients.

    Tests close their clients themselves (``async with``), inside their loop; whatever a failed
    test left open is closed here on a loop of its own, as a safety net only.
    """
    # Imported here, not at the top: the rest of this directory must load without it.
    from turbolock.asyncio import AsyncRedlockClient

    clients: list[Any] = []

    def make(servers: list[Any], **options: Any) -> Any:
        options.setdefault("core", core_name)
        options.setdefault("key_prefix", key_prefix)
        given = [server.url if isinstance(server, RedisServer) else server for server in servers]
        client = AsyncRedlockClient(given, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        try:
            run_in_new_loop("asyncio", client.close)
        except Exception:
            pass  # a safety net; what a test checks about close() it checks itself


@pytest.fixture
def raws() -> Iterator[Callable[[list[RedisServer]], list[redis.Redis]]]:
    """``raws(servers)``: redis-py on each master, to look at (or tamper with) keys behind the
    client's back."""
    opened: list[redis.Redis] = []

    def make(servers: list[RedisServer]) -> list[redis.Redis]:
        connections = [redis.Redis(host=server.host, port=server.port) for server in servers]
        opened.extend(connections)
        return connections

    yield make
    for connection in opened:
        connection.close()
