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

from _raw import raw_connection
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
    yield from raw_connection(own_server)


# -- Redlock over the masters of tests/conftest.py (test_async_redlock_*.py) -------------------------


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
