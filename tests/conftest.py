"""Fixtures: real redis-server processes and clients on both cores (ids ``c`` and ``py``).

No fake or mocked Redis anywhere: every server here is Debian's redis-server on a free
loopback port, with no persistence, stopped when its scope ends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient
from turbolock._wire import core as _core
from turbolock.redis_server import RedisServer

REQUIRE_C = os.environ.get("TURBOLOCK_REQUIRE_EXTENSIONS", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One server shared by the session; tests keep apart by key prefix."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A server for this test alone: for restarts, pauses and configuration changes."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session", params=["c", "py"])
def core_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "c" and _core.core_c is None:
        if REQUIRE_C:
            pytest.fail("TURBOLOCK_REQUIRE_EXTENSIONS=1 but the compiled core did not import")
        pytest.skip("the compiled core is not built")
    return name


@pytest.fixture
def key_prefix() -> str:
    return f"t-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def client(redis_server: RedisServer, core_name: str, key_prefix: str) -> Iterator[LockClient]:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as lock_client:
        yield lock_client


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """redis-py on the same server, to look at (or tamper with) keys behind the client's back."""
    connection = redis.Redis(host=redis_server.host, port=redis_server.port)
    yield connection
    connection.close()
