"""Bad input is refused before anything is sent: too few masters, one server listed twice
(under any URL), a ttl that cannot leave validity, bad options. The constructor's checks run
for the threaded and the asyncio client alike (the asyncio calls' are compared with these in
``tests/asyncio/test_async_redlock_validation.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from turbolock import InvalidArgumentError, InvalidArgumentTypeError, LockClient, QuorumError, RedlockClient
from turbolock.asyncio import AsyncLockClient, AsyncRedlockClient
from turbolock.redis_server import RedisServer, free_port


class Kind(NamedTuple):
    redlock: Callable[..., Any]
    master: Callable[..., Any]
    close: Callable[[Any], None]

    @staticmethod
    def close_threaded(client: Any) -> None:
        client.close()

    @staticmethod
    def close_async(client: Any) -> None:
        asyncio.run(client.close())


def _nothing_listens() -> list[str]:
    return [f"redis://127.0.0.1:{free_port()}/0" for _ in range(3)]


@pytest.fixture(params=["threaded", "asyncio"])
def kind(request: pytest.FixtureRequest) -> Kind:
    """The threaded and the asyncio Redlock client, each with the client type of its masters:
    their constructors share one set of checks (``_flows/redlock_rules``)."""
    if request.param == "threaded":
        return Kind(RedlockClient, LockClient, Kind.close_threaded)
    return Kind(AsyncRedlockClient, AsyncLockClient, Kind.close_async)


@pytest.mark.parametrize("count", [0, 1, 2])
def test_fewer_than_three_masters_are_refused(kind: Kind, count: int) -> None:
    with pytest.raises(InvalidArgumentError, match="at least 3") as info:
        kind.redlock(_nothing_listens()[:count])
    assert info.value.argument == "masters"


@pytest.mark.parametrize("masters", ["redis://127.0.0.1:1/0", b"x", None, 3, {"redis://127.0.0.1:1/0"}])
def test_masters_must_be_a_list(kind: Kind, masters: object) -> None:
    with pytest.raises(InvalidArgumentTypeError) as info:
        kind.redlock(masters)
    assert info.value.argument == "masters"


def test_masters_must_be_urls_or_clients_of_the_same_kind(kind: Kind) -> None:
    with pytest.raises(InvalidArgumentTypeError, match="int") as info:
        kind.redlock(["redis://127.0.0.1:7001/0", "redis://127.0.0.1:7002/0", 7003])
    assert info.value.argument == "masters"
    # A blocking client is no master of an asyncio Redlock, nor an asyncio one of a blocking Redlock.
    other = (AsyncLockClient if kind.master is LockClient else LockClient)("127.0.0.1", free_port())
    try:
        with pytest.raises(InvalidArgumentTypeError) as info:
            kind.redlock([other, *_nothing_listens()[:2]])
        assert info.value.argument == "masters"
    finally:
        (Kind.close_threaded if isinstance(other, LockClient) else Kind.close_async)(other)


@pytest.mark.parametrize("second", [
    "redis://127.0.0.1:{port}/0",          # the same URL twice
    "redis://localhost:{port}/0",          # a host name resolving to the same address
    "redis://127.0.0.1:{port}/3",          # another database of the same server
    "redis://:secret@127.0.0.1:{port}/0",  # with credentials (never echoed back)
    "redis://0.0.0.0:{port}/0",            # the unspecified address reaches this host
])
def test_the_same_server_twice_is_refused(kind: Kind, second: str) -> None:
    port = free_port()
    masters = [f"redis://127.0.0.1:{port}/0", second.format(port=port), f"redis://127.0.0.1:{free_port()}/0"]
    with pytest.raises(InvalidArgumentError, match="same server") as info:
        kind.redlock(masters)
    assert info.value.argument == "masters"
    assert "secret" not in str(info.value)
    assert f"127.0.0.1:{port}" in str(info.value)


def test_a_unix_socket_listed_twice_is_refused(kind: Kind, tmp_path: object) -> None:
    path = f"{tmp_path}/redis.sock"
    with pytest.raises(InvalidArgumentError, match="same server") as info:
        kind.redlock([f"unix://{path}", f"unix://{path}?db=2", "redis://127.0.0.1:7001/0"])
    assert info.value.argument == "masters"


def test_a_client_and_a_url_for_one_server_are_refused(kind: Kind) -> None:
    port = free_port()
    client = kind.master("localhost", port)
    try:
        with pytest.raises(InvalidArgumentError, match="same server"):
            kind.redlock([client, f"redis://127.0.0.1:{port}/0", f"redis://127.0.0.1:{free_port()}/0"])
        with pytest.raises(InvalidArgumentError, match="same server"):
            kind.redlock([client, client, f"redis://127.0.0.1:{free_port()}/0"])
    finally:
        kind.close(client)


def test_clients_must_share_one_key_prefix(kind: Kind) -> None:
    clients = [kind.master("127.0.0.1", free_port(), key_prefix=prefix) for prefix in ("a:", "a:", "b:")]
    try:
        with pytest.raises(InvalidArgumentError, match="key prefix"):
            kind.redlock(clients)
        with pytest.raises(InvalidArgumentError, match="key prefix") as info:
            kind.redlock([*clients[:2], f"redis://127.0.0.1:{free_port()}/0"], key_prefix="c:")
        assert info.value.argument == "key_prefix"
    finally:
        for client in clients:
            kind.close(client)


@pytest.mark.parametrize(("option", "value", "error"), [
    ("node_timeout", 0, InvalidArgumentError),
    ("node_timeout", -1, InvalidArgumentError),
    ("node_timeout", "1", InvalidArgumentTypeError),
    ("retry_count", -1, InvalidArgumentError),
    ("retry_count", 1.5, InvalidArgumentTypeError),
    ("retry_delay", -0.1, InvalidArgumentError),
    ("retry_delay", float("inf"), InvalidArgumentError),
    ("retry_delay", 1e300, InvalidArgumentError),  # once accepted: time.sleep overflowed
    ("drift_factor", 0.5, InvalidArgumentError),
    ("drift_factor", -0.01, InvalidArgumentError),
    ("drift_factor", "0.01", InvalidArgumentTypeError),
    ("chunk_size", 0, InvalidArgumentError),
    ("chunk_size", 1.5, InvalidArgumentTypeError),
    ("core", "rust", InvalidArgumentError),
    ("key_prefix", 5, InvalidArgumentTypeError),
])
def test_bad_options_are_refused(kind: Kind, option: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        kind.redlock(_nothing_listens(), **{option: value})
    assert info.value.argument == option  # type: ignore[attr-defined]


def test_an_unknown_connection_keyword_is_refused(kind: Kind) -> None:
    with pytest.raises(InvalidArgumentTypeError, match="colour") as info:
        kind.redlock(_nothing_listens(), colour="blue")
    assert "colour" in str(info.value)


def test_a_ttl_without_room_for_validity_is_refused(session_masters: list[RedisServer],
                                                    core_name: str) -> None:
    urls = [server.url for server in session_masters[:3]]
    with RedlockClient(urls, core=core_name) as client:
        # 2 ms: the drift allowance alone (2 ms + 1%) takes it all.
        with pytest.raises(InvalidArgumentError, match="no validity") as info:
            client.try_acquire("short", 0.002)
        assert info.value.argument == "ttl"
        # 40 ms is fine on its own (the node timeout shrinks to 4 ms) but not with a 50 ms node timeout.
        # Accepted, not refused: a master slower than 4 ms under load may fail an attempt (None,
        # or no quorum when the masters' first connections took longer to open), so a few.
        lease = None
        for _ in range(5):
            try:
                lease = client.try_acquire("short", 0.04)
            except QuorumError:
                continue
            if lease is not None:
                break
        assert lease is not None and client.release(lease)
    with RedlockClient(urls, core=core_name, node_timeout=0.05) as client:
        for call in (lambda: client.try_acquire("short", 0.04), lambda: client.lock("short", 0.04),
                     lambda: client.acquire_many(["a", "b"], 0.04)):
            with pytest.raises(InvalidArgumentError, match="node_timeout"):
                call()
        lease = client.try_acquire("short", 0.1)
        assert lease is not None
        with pytest.raises(InvalidArgumentError, match="no validity"):
            client.extend(lease, 0.04)
        assert client.release(lease)


def test_bad_call_arguments_are_refused_before_sending(core_name: str) -> None:
    # Nothing listens on these ports: any attempt to send would fail with a connection error.
    with RedlockClient(_nothing_listens(), core=core_name) as client:
        bad: list[tuple[Callable[[], object], type[Exception], str]] = [
            (lambda: client.try_acquire("", 1), InvalidArgumentError, "name"),
            (lambda: client.try_acquire(3, 1), InvalidArgumentTypeError, "name"),  # type: ignore[arg-type]
            (lambda: client.try_acquire("n", None), InvalidArgumentTypeError, "ttl"),  # type: ignore[arg-type]
            (lambda: client.try_acquire("n", 1, token=b"short"), InvalidArgumentError, "token"),
            (lambda: client.try_acquire("n", 1, max_extensions=-1), InvalidArgumentError, "max_extensions"),
            (lambda: client.try_acquire("n", 1, on_lost=print), InvalidArgumentError, "on_lost"),
            (lambda: client.try_acquire("n", 1, auto_renew=True, on_lost=3),  # type: ignore[arg-type]
             InvalidArgumentTypeError, "on_lost"),
            (lambda: client.acquire("n", 1, timeout=-1), InvalidArgumentError, "timeout"),
            (lambda: client.acquire("n", 1, blocking=1), InvalidArgumentTypeError, "blocking"),  # type: ignore[arg-type]
            (lambda: client.release(None), InvalidArgumentTypeError, "lease"),  # type: ignore[arg-type]
            (lambda: client.extend("x", 1), InvalidArgumentTypeError, "lease"),  # type: ignore[arg-type]
            (lambda: client.acquire_many(["a", "a"], 1), InvalidArgumentError, "names"),
            (lambda: client.acquire_many("ab", 1), InvalidArgumentTypeError, "names"),
            (lambda: client.release_many([None]), InvalidArgumentTypeError, "leases"),  # type: ignore[list-item]
            (lambda: client.lock("n", 1, timeout="x"), InvalidArgumentTypeError, "timeout"),  # type: ignore[arg-type]
        ]
        for call, error, argument in bad:
            with pytest.raises(error) as info:
                call()
            assert info.value.argument == argument  # type: ignore[attr-defined]
        assert all(client._pool._in_use == 0 and not client._pool._idle for client in client.masters)
