"""Servers that are not Redis on the port: an echo server, an HTTP server and one that never answers.

Every new connection ends its handshake with PING (after AUTH and SELECT, in the same round trip):
a server that does not answer PONG is a ``ProtocolError`` naming the address, raised before any
lock command is sent, and never quoting what came back (an echo server sends the AUTH command,
password included, straight back). A server that accepts and stays silent is a ``TimeoutError``
within the connect deadline. Each server here is a real TCP listener on 127.0.0.1, on a thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
import selectors
import socket
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis

from turbolock import (
    AuthenticationError,
    LockClient,
    LockError,
    OutcomeUnknownError,
    ProtocolError,
    TimeoutError,
)
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

PASSWORD = "N0t-For-Echo-Servers-7b1e"
HTTP_REPLY = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
LOOPS = ["asyncio", "uvloop"] if importlib.util.find_spec("uvloop") is not None else ["asyncio"]
# Scheduling on a shared 2-core machine: a deadline may be overrun by this much, never more.
SLACK = 1.0


class NotRedis:
    """A TCP server on 127.0.0.1 that answers like something other than Redis.

    ``echo`` sends every byte back; ``http`` answers the first bytes with ``400 Bad Request`` and
    closes its side; ``silent`` reads and drops everything, never writing. ``connections`` counts
    the connections accepted. The thread stops at ``stop()`` and closes every socket.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.connections = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"not-redis-{kind}", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, *, password: bool = True, db: int = 0) -> str:
        credentials = f"locker:{PASSWORD}@" if password else ""
        return f"redis://{credentials}127.0.0.1:{self.port}/{db}"

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        clients: list[socket.socket] = []
        try:
            while not self._stopping.is_set():
                for key, _ in selector.select(0.02):
                    sock: socket.socket = key.fileobj  # type: ignore[assignment]
                    if sock is self._listener:
                        try:
                            client, _ = sock.accept()
                        except BlockingIOError:
                            continue
                        self.connections += 1
                        client.setblocking(False)
                        clients.append(client)
                        selector.register(client, selectors.EVENT_READ)
                    elif not self._answer(sock):
                        selector.unregister(sock)
                        clients.remove(sock)
                        sock.close()
        finally:
            for client in clients:
                client.close()
            selector.close()
            self._listener.close()

    def _answer(self, sock: socket.socket) -> bool:
        """Serve what ``sock`` sent; False once it is to be closed."""
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        try:
            if self.kind == "echo":
                sock.sendall(data)
            elif self.kind == "http":
                # Like a web server: answer, then stop writing but keep reading until the client
                # closes (closing with unread bytes would reset the connection, reply unread).
                sock.sendall(HTTP_REPLY)
                sock.shutdown(socket.SHUT_WR)  # a second request on it fails to send, and closes it
        except OSError:
            return False
        return True

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(5)


@pytest.fixture(params=["echo", "http"])
def not_redis(request: pytest.FixtureRequest) -> Iterator[NotRedis]:
    server = NotRedis(request.param)
    yield server
    server.stop()


@pytest.fixture
def silent_server() -> Iterator[NotRedis]:
    server = NotRedis("silent")
    yield server
    server.stop()


@pytest.fixture(params=LOOPS)
def run(request: pytest.FixtureRequest) -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """``run(coroutine_function)`` in a new loop of the parametrised kind, closed afterwards."""
    def runner(body: Callable[[], Awaitable[Any]]) -> Any:
        loop: asyncio.AbstractEventLoop
        if request.param == "uvloop":
            import uvloop

            loop = uvloop.new_event_loop()
        else:
            loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(asyncio.wait_for(body(), 30))
        finally:
            loop.close()

    return runner


def _shown(error: BaseException) -> list[str]:
    """Every way the error shows up: message, repr, arguments and the formatted traceback."""
    return [str(error), repr(error), *map(str, error.args),
            "".join(traceback.format_exception(type(error), error, error.__traceback__))]


def _assert_not_redis_error(error: BaseException, server: NotRedis) -> None:
    assert type(error) is ProtocolError, f"{type(error).__name__}: {error}"
    message = str(error)
    assert server.address in message
    assert "does not speak RESP as Redis does" in message
    assert not isinstance(error, OutcomeUnknownError), "nothing was sent: the outcome is known"
    for text in _shown(error):
        assert PASSWORD not in text, f"the password shows in {text!r}"
        for echoed in ("locker", "$4", "\\r\\n", "HTTP/1.1", "Bad Request"):
            assert echoed not in text, f"the server's bytes are quoted in {text!r}"


URL_SHAPES = [
    pytest.param({"password": True, "db": 0}, id="auth"),
    pytest.param({"password": True, "db": 3}, id="auth-select"),
    pytest.param({"password": False, "db": 0}, id="ping-only"),
]


# -- the blocking client ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", URL_SHAPES)
def test_sync_client_refuses_a_server_that_is_not_redis(not_redis: NotRedis, core_name: str,
                                                         shape: dict[str, Any]) -> None:
    with LockClient.from_url(not_redis.url(**shape), core=core_name, connect_timeout=2, timeout=2) as client:
        calls: list[Callable[[], object]] = [
            lambda: client.try_acquire("order:1", 10),
            lambda: client.query("order:1"),
            lambda: client.acquire_many(["a", "b"], 10),
            lambda: client.lock("order:1", 10).acquire(blocking=False),
        ]
        for call in calls:
            started = time.monotonic()
            with pytest.raises(LockError) as raised:
                call()
            assert time.monotonic() - started < 2 + SLACK
            _assert_not_redis_error(raised.value, not_redis)
        assert client.pending_cleanup == 0, "no lock command ever left: nothing is maybe-held"
    assert not_redis.connections == len(calls), "each call tried one new connection, and gave up on it"


@pytest.mark.parametrize(("connect_timeout", "timeout"), [(0.3, 5.0), (5.0, 0.4)],
                         ids=["connect-timeout", "call-deadline"])
def test_sync_client_gives_up_on_a_silent_server(silent_server: NotRedis, core_name: str,
                                                 connect_timeout: float, timeout: float) -> None:
    limit = min(connect_timeout, timeout)
    with LockClient.from_url(silent_server.url(), core=core_name, connect_timeout=connect_timeout,
                             timeout=timeout) as client:
        for call in (lambda: client.try_acquire("x", 10), lambda: client.query("x")):
            started = time.monotonic()
            with pytest.raises(TimeoutError) as raised:
                call()
            elapsed = time.monotonic() - started
            assert limit * 0.9 <= elapsed < limit + SLACK, elapsed
            assert silent_server.address in str(raised.value)
            assert not isinstance(raised.value, OutcomeUnknownError)
            for text in _shown(raised.value):
                assert PASSWORD not in text
        assert client.pending_cleanup == 0


# -- the asyncio client ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", URL_SHAPES)
def test_async_client_refuses_a_server_that_is_not_redis(not_redis: NotRedis, core_name: str,
                                                          shape: dict[str, Any],
                                                          run: Callable[..., Any]) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(not_redis.url(**shape), core=core_name, connect_timeout=2,
                                            timeout=2) as client:
            calls: list[Callable[[], Awaitable[object]]] = [
                lambda: client.try_acquire("order:1", 10),
                lambda: client.query("order:1"),
                lambda: client.acquire_many(["a", "b"], 10),
            ]
            for call in calls:
                started = time.monotonic()
                with pytest.raises(LockError) as raised:
                    await call()
                assert time.monotonic() - started < 2 + SLACK
                _assert_not_redis_error(raised.value, not_redis)
            assert client.pending_cleanup == 0
            assert client._pool.connections == [], "a connection that failed its handshake is not kept"

    run(body)


@pytest.mark.parametrize(("connect_timeout", "timeout"), [(0.3, 5.0), (5.0, 0.4)],
                         ids=["connect-timeout", "call-deadline"])
def test_async_client_gives_up_on_a_silent_server(silent_server: NotRedis, core_name: str,
                                                  connect_timeout: float, timeout: float,
                                                  run: Callable[..., Any]) -> None:
    limit = min(connect_timeout, timeout)

    async def body() -> None:
        async with AsyncLockClient.from_url(silent_server.url(), core=core_name,
                                            connect_timeout=connect_timeout, timeout=timeout) as client:
            for call in (lambda: client.try_acquire("x", 10), lambda: client.query("x")):
                started = time.monotonic()
                with pytest.raises(TimeoutError) as raised:
                    await call()
                elapsed = time.monotonic() - started
                assert limit * 0.9 <= elapsed < limit + SLACK, elapsed
                assert silent_server.address in str(raised.value)
                assert not isinstance(raised.value, OutcomeUnknownError)
                for text in _shown(raised.value):
                    assert PASSWORD not in text
            assert client.pending_cleanup == 0

    run(body)


# -- a real Redis ----------------------------------------------------------------------------------

def _pings(server: RedisServer) -> int:
    with redis.Redis(host=server.host, port=server.port) as raw:
        stats: dict[str, Any] = raw.info("commandstats")
    return int(stats.get("cmdstat_ping", {}).get("calls", 0))


def test_one_ping_per_new_connection_and_none_per_call(own_server: RedisServer, core_name: str,
                                                       key_prefix: str, run: Callable[..., Any]) -> None:
    url = f"redis://127.0.0.1:{own_server.port}/2"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
        for _ in range(20):
            lease = client.try_acquire("pinged", 10)
            assert lease is not None and client.release(lease)
    assert _pings(own_server) == 1, "sequential calls share one connection, which pinged once"

    async def body() -> None:
        async with AsyncLockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client:
            for _ in range(20):
                lease = await client.try_acquire("pinged", 10)
                assert lease is not None and await client.release(lease)

    run(body)
    assert _pings(own_server) == 2


def test_a_password_server_without_credentials_is_an_authentication_error(core_name: str,
                                                                          run: Callable[..., Any]) -> None:
    # PING is the first command the server sees, and a Redis with requirepass refuses it.
    with RedisServer(extra_config=[f"requirepass {PASSWORD}"]) as server:
        with LockClient.from_url(server.url, core=core_name) as client, \
                pytest.raises(AuthenticationError) as raised:
            client.query("x")
        assert "NOAUTH" in str(raised.value) and f"127.0.0.1:{server.port}" in str(raised.value)

        async def body() -> None:
            async with AsyncLockClient.from_url(server.url, core=core_name) as client:
                with pytest.raises(AuthenticationError) as raised:
                    await client.query("x")
                assert "NOAUTH" in str(raised.value)

        run(body)
