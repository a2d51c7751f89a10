"""Fixtures: five session masters (tests use the first 3 or all 5), masters of a test's own
for stopping and restarting, Redlock clients on both cores, and redis-py views of each master."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis

from turbolock import RedlockClient
from turbolock.redis_server import RedisServer


def _start(count: int) -> list[RedisServer]:
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
    servers = _start(5)
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
    """``own_masters(n)``: n servers for this test alone, to stop, pause and restart."""
    started: list[RedisServer] = []

    def make(count: int) -> list[RedisServer]:
        servers = _start(count)
        started.extend(servers)
        return servers

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def make_redlock(core_name: str, key_prefix: str) -> Iterator[Callable[..., RedlockClient]]:
    """``make_redlock(servers, **options)``: a RedlockClient on this test's core and key prefix."""
    clients: list[RedlockClient] = []

    def make(servers: list[RedisServer], **options: object) -> RedlockClient:
        options.setdefault("core", core_name)
        options.setdefault("key_prefix", key_prefix)
        client = RedlockClient([server.url for server in servers], **options)  # type: ignore[arg-type]
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def raws() -> Iterator[Callable[[list[RedisServer]], list[redis.Redis]]]:
    """``raws(servers)``: redis-py on each master, to look at keys behind the client's back."""
    opened: list[redis.Redis] = []

    def make(servers: list[RedisServer]) -> list[redis.Redis]:
        connections = [redis.Redis(host=server.host, port=server.port) for server in servers]
        opened.extend(connections)
        return connections

    yield make
    for connection in opened:
        connection.close()
