"""What a URL may say, checked before anything is sent: every query option is applied or
refused (never dropped in silence), TLS options only where TLS is on, a host always named, a
Sentinel's or start-up node's URL only a host and port; and nothing from a URL holding
credentials is quoted back, even when an unencoded ``/``, ``#`` or ``?`` in the password spills
it into the port, path or query that an error names."""

from __future__ import annotations

import time

import pytest

from turbolock import (
    InvalidArgumentError,
    LockClient,
    LockError,
    RedlockClient,
    SentinelLockClient,
)
from turbolock.asyncio import AsyncLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_server import RedisServer

# Passwords a password manager could hand out, pasted into a URL without percent-encoding.
RAW_PASSWORDS = ["Hunter2Secret#tail", "Abc9Secret/xyz+Q==", "Pa55Secret?more", "1234/5678Secret"]


def _pieces(password: str) -> list[str]:
    """The parts of ``password`` between the characters that end a URL's authority (4+ long)."""
    pieces = [password]
    for separator in "#/?":
        pieces = [part for piece in pieces for part in piece.split(separator)]
    return [piece for piece in pieces if len(piece) >= 4]


@pytest.mark.parametrize("password", RAW_PASSWORDS)
def test_an_unreadable_url_with_credentials_quotes_none_of_them(redis_server: RedisServer,
                                                                password: str) -> None:
    url = f"redis://admin:{password}@127.0.0.1:{redis_server.port}/0"
    makers = [LockClient.from_url, AsyncLockClient.from_url, ClusterLockClient.from_url,
              lambda u: RedlockClient([u, u + "?x", u + "?y"]), lambda u: SentinelLockClient([u], "svc")]
    for make in makers:
        with pytest.raises(LockError) as raised:
            make(url)
        text = f"{raised.value}\n{raised.value!r}"
        assert not [piece for piece in _pieces(password) if piece in text], text


def test_without_credentials_the_bad_part_is_quoted() -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_url("redis://127.0.0.1:6390/abc")
    assert raised.value.argument == "db" and "'abc'" in str(raised.value)


@pytest.mark.parametrize("query, argument, says", [
    ("socket_timout=0.3", "url", "did you mean 'socket_timeout'?"),
    ("foo=bar", "url", "unknown query option 'foo'"),
    ("ssl_certfile=/etc/hostname", "ssl_certfile", "not rediss://"),
    ("timeout=1&socket_timeout=2", "socket_timeout", "same option"),
    ("connect_timeout=soon", "connect_timeout", "must be a number"),
    ("timeout=1&timeout=2", "timeout", "given twice"),
    ("wake_waiters=true&wake_waiters=false", "wake_waiters", "given twice"),
])
def test_a_query_option_is_applied_or_refused(query: str, argument: str, says: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_url(f"redis://127.0.0.1:6390/0?{query}")
    assert raised.value.argument == argument and says in str(raised.value), raised.value


def test_redis_py_tuning_options_are_accepted() -> None:
    """A URL shared with redis-py may carry its connection tuning: taken, without effect here."""
    with LockClient.from_url("redis://127.0.0.1:6390/0?health_check_interval=30&max_connections=50"
                             "&socket_keepalive=true&protocol=2") as client:
        assert client.options.port == 6390


def test_the_timeouts_in_a_url_under_turbolocks_names() -> None:
    options = LockClient.from_url("redis://127.0.0.1:6390/0?timeout=0.3&connect_timeout=0.2").options
    assert (options.timeout, options.connect_timeout) == (0.3, 0.2)


@pytest.mark.timing
def test_a_timeout_in_the_url_bounds_a_call_to_a_paused_server(own_server: RedisServer,
                                                                core_name: str) -> None:
    with LockClient.from_url(f"{own_server.url}?timeout=0.3", core=core_name) as client:
        assert client.try_acquire("warm", 5) is not None  # connected before the pause
        own_server.pause()
        started = time.monotonic()
        try:
            with pytest.raises(LockError):
                client.query("x")
        finally:
            own_server.resume()
        took = time.monotonic() - started
    assert took < 1.5, f"the call took {took:.1f} s against the URL's 0.3 s timeout"


def test_a_tls_keyword_without_tls_is_refused() -> None:
    """Without this the client would talk in plain text to a user who believed it verified a
    certificate."""
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient("127.0.0.1", 6390, ssl_ca_certs="/etc/hostname")
    assert raised.value.argument == "ssl_ca_certs"


@pytest.mark.parametrize("url", ["redis://:6390/0", "redis://user:pw@:6390/0", "rediss://:6390", "redis://"])
def test_a_url_without_a_host_is_refused(url: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_url(url)
    assert raised.value.argument == "host"
    assert "pw" not in str(raised.value)


def test_an_option_given_twice_alike_is_taken() -> None:
    assert LockClient.from_url("redis://127.0.0.1:6390/0?timeout=0.3&timeout=0.3").options.timeout == 0.3


@pytest.mark.parametrize("url", ["unix://", "unix://?db=1", "unix://?timeout=1"])
def test_a_socket_url_without_a_path_is_refused(url: str) -> None:
    """It was read as a TCP client of 127.0.0.1:6379: whatever server listens there."""
    for make in (LockClient.from_url, AsyncLockClient.from_url):
        with pytest.raises(InvalidArgumentError) as raised:
            make(url)
        assert raised.value.argument == "url" and "socket path" in str(raised.value)


SENTINEL_PASSWORD = "Sentinel-Secret-77"


@pytest.mark.parametrize("node", [f"redis://:{SENTINEL_PASSWORD}@127.0.0.1:26379",
                                  "rediss://127.0.0.1:26379", "redis://127.0.0.1:26379/2",
                                  "redis://127.0.0.1:26379?socket_timeout=1"])
def test_a_node_url_that_says_more_than_where_is_refused(node: str) -> None:
    """A Sentinel's or a start-up node's URL gives an address; credentials, TLS, a db or options
    there would be dropped while the user believed them used."""
    with pytest.raises(InvalidArgumentError) as sentinel:
        SentinelLockClient([node], "svc")
    assert sentinel.value.argument == "sentinels" and "sentinel_password=" in str(sentinel.value)
    with pytest.raises(InvalidArgumentError) as cluster:
        ClusterLockClient("127.0.0.1", 7000, startup_nodes=[node])
    assert cluster.value.argument == "startup_nodes"
    for error in (sentinel.value, cluster.value):
        assert SENTINEL_PASSWORD not in str(error)


def test_a_plain_node_url_is_an_address() -> None:
    with ClusterLockClient("127.0.0.1", 7000, startup_nodes=["redis://127.0.0.1:7001/0"]) as client:
        assert ("127.0.0.1", 7001) in client._startup


def test_credentials_in_the_query_as_redis_py_reads_them(core_name: str) -> None:
    """redis-py's form for a socket's credentials, ``unix:///path?db=0&password=...``, and the
    same on TCP: taken, as before the query check (an unknown-option error would quote nothing
    from such a URL)."""
    with RedisServer(extra_config=["requirepass query-pw"]) as server:
        for url in (f"unix://{server.unix_socket}?db=0&password=query-pw",
                    f"redis://127.0.0.1:{server.port}/0?password=query-pw",
                    f"redis://127.0.0.1:{server.port}/0?username=default&password=query-pw"):
            with LockClient.from_url(url, core=core_name) as client:
                lease = client.try_acquire("via-query", 5)
                assert lease is not None and client.release(lease)
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_url("redis://127.0.0.1:6390/0?password=Query-Secret-9&fo=1")
    assert "Query-Secret-9" not in str(raised.value) and "'fo'" not in str(raised.value)


def test_ssl_password_in_a_rediss_query_is_applied() -> None:
    options = LockClient.from_url("rediss://127.0.0.1:6390/0?ssl_password=key-pw").options
    assert options.ssl_password == "key-pw"
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_url("redis://127.0.0.1:6390/0?ssl_password=key-pw")
    assert raised.value.argument == "ssl_password" and "key-pw" not in str(raised.value)
