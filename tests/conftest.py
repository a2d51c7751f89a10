"""Fixtures: real redis-server processes and clients on both cores (ids ``c`` and ``py``), and
five masters for the Redlock tests (threaded and asyncio alike).

No fake or mocked Redis anywhere: every server here is Debian's redis-server on a free
loopback port, with no persistence, stopped when its scope ends.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _netfaults import FaultProxy
from _pki import Pki, make_pki
from _raw import Raws, raw_connection
from _tls_support import missing_tls
from turbolock import LockClient, redis_cluster
from turbolock._wire import core as _core
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

REQUIRE_C = os.environ.get("TURBOLOCK_REQUIRE_EXTENSIONS", "").strip().lower() not in ("", "0", "false", "no")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker picks cluster node ports from a range of its own: a node
    restarted by one worker's test must find its port still free, not taken meanwhile by a
    cluster another worker created from the same few thousand ports."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if worker.startswith("gw") and count > 1:
        index = int(worker[2:])
        width = (redis_cluster.HIGHEST_PORT - redis_cluster.LOWEST_PORT + 1) // count
        redis_cluster.LOWEST_PORT += index * width
        redis_cluster.HIGHEST_PORT = redis_cluster.LOWEST_PORT + width - 1


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on Redlock masters count on every master answering within the default node timeout
    (50 ms; less for short ttls): they are timing tests too, run after the parallel run, alone."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "session_masters" in fixtures or "own_masters" in fixtures:
            item.add_marker(pytest.mark.timing)


CORES = os.environ.get("TURBOLOCK_TEST_CORES", "c,py").split(",")
"""The cores the behavioural tests run on (``TURBOLOCK_TEST_CORES=c``: the compiled one only)."""


@pytest.fixture(scope="session", params=CORES)
def core_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "c" and _core.core_c is None:
        if REQUIRE_C:
            pytest.fail("TURBOLOCK_REQUIRE_EXTENSIONS=1 but the compiled core did not import")
        pytest.skip("the compiled core is not built")
    return name


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA and certificates for the TLS tests (``_pki``); they skip on a server without TLS."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    why = missing_tls()
    if why is not None:
        pytest.skip(why)
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def postgres() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster (``initdb``/``pg_ctl`` on a free port) for the module."""
    from _postgres import Postgres, binaries

    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed here (scripts/bootstrap.sh installs Debian's postgresql)")
    server = Postgres(bin_dir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def key_prefix() -> str:
    return f"t-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def client(redis_server: RedisServer, core_name: str, key_prefix: str) -> Iterator[LockClient]:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as lock_client:
        yield lock_client


@pytest.fixture(params=FRONTS)
def make_client(request: pytest.FixtureRequest, redis_server: RedisServer, core_name: str,
                key_prefix: str) -> Iterator[Callable[..., Any]]:
    """``make_client(**options)``: a LockClient on the shared server, or its asyncio twin driven
    by ``Blocking`` (the test runs on both), on this test's core and key prefix."""
    url = redis_server.url
    fronts = Fronts(request.param, partial(LockClient.from_url, url), partial(AsyncLockClient.from_url, url),
                    core=core_name, key_prefix=key_prefix)
    yield fronts.make
    fronts.close()


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """redis-py on the same server, to look at (or tamper with) keys behind the client's back."""
    yield from raw_connection(redis_server)


# -- Redlock masters (tests/redlock and the asyncio Redlock tests) -----------------------------------


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
    """Five servers shared by the session's Redlock tests (the first 3 or all 5 are used); tests
    keep apart by key prefix. A test that pauses one resumes it before it ends."""
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
def raws() -> Iterator[Raws]:
    """``raws(servers)``: redis-py on each master, to look at keys behind the client's back."""
    opened: list[redis.Redis] = []

    def make(servers: list[RedisServer]) -> list[redis.Redis]:
        connections = [redis.Redis(host=server.host, port=server.port) for server in servers]
        opened.extend(connections)
        return connections

    yield make
    for connection in opened:
        connection.close()


@pytest.fixture
def third_proxy(three: list[RedisServer]) -> Iterator[FaultProxy]:
    """A proxy in front of the third master that still delivers what it held back after the
    client's side closed: a write that reaches that master late."""
    with FaultProxy("127.0.0.1", three[2].port) as started:
        started.deliver_after_close = True
        yield started
