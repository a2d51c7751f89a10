"""Fixtures for the deadline tests: faulty endpoints (a silent server, a SIGSTOPped redis-server,
a black-holed proxy), an asyncio runner like ``tests/asyncio``'s, and redis-py views.

The servers and clients of ``tests/conftest.py`` (``redis_server``, ``own_server``, ``core_name``,
``key_prefix``) are used as they are; nothing here is mocked.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from _netfaults import Fault, FaultProxy, open_fault
from turbolock.redis_server import RedisServer

FAULTS = ["silent", "paused", "blackhole"]

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None
LOOPS = ["asyncio", "uvloop"] if HAVE_UVLOOP else ["asyncio"]
TEST_LIMIT = 30.0
"""Every asyncio test body runs under this limit: a call that never returns fails the test."""

Runner = Callable[[Callable[[], Awaitable[Any]]], Any]

LATE = 0.7
"""Seconds every reply of ``late_replies`` comes late: more than half a 1 s timeout, so a call
that spends it twice (a connect and a command, a command and its retry) passes its budget."""


@pytest.fixture
def late_replies(redis_server: RedisServer) -> Iterator[FaultProxy]:
    """A proxy in front of the test's server, every reply ``LATE`` seconds late."""
    with FaultProxy(redis_server.host, redis_server.port) as proxy:
        proxy.delay(LATE, to_server=False, to_client=True)
        yield proxy


@pytest.fixture(params=FAULTS)
def fault(request: pytest.FixtureRequest) -> Iterator[Fault]:
    """Each kind of faulty endpoint in turn (call ``inject()`` after a first successful call
    when ``fault.warm``); healed and stopped at the end of the test."""
    with open_fault(request.param, lambda: request.getfixturevalue("own_server"),
                    lambda: request.getfixturevalue("redis_server")) as made:
        yield made


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[FaultProxy]:
    """A proxy in front of the shared server, forwarding until ``blackhole()``."""
    with FaultProxy(redis_server.host, redis_server.port) as made:
        yield made


def _new_loop(name: str) -> asyncio.AbstractEventLoop:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run_in_new_loop(name: str, body: Callable[[], Awaitable[Any]]) -> Any:
    loop = _new_loop(name)
    try:
        async def main() -> Any:
            return await asyncio.wait_for(body(), TEST_LIMIT)

        return loop.run_until_complete(main())
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


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
    """Like ``arun``, on asyncio's own loop only (to keep slow tests to one loop)."""
    return lambda body: run_in_new_loop("asyncio", body)
