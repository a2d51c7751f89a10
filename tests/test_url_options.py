"""Connection options: URLs read strictly, host/port/db checked, redis-py's keyword names accepted,
unknown keywords refused as turbolock errors; and every error able to name its locks.

Nothing here needs a server except the tests that show the options at work against a real one.
"""

from __future__ import annotations

import pickle
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from turbolock import (
    AcquireOutcomeUnknownError,
    AuthenticationError,
    ConnectionError,
    ConnectionOptions,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockClient,
    LockError,
    LockLostError,
    LockNotOwnedError,
    OutcomeUnknownError,
    ProtocolError,
    QuorumError,
    RedlockClient,
    ResponseError,
    TimeoutError,
)
from turbolock.asyncio import AsyncLockClient
from turbolock.errors import RedlockNotAcquiredError
from turbolock.options import options_from_keywords
from turbolock.redis_server import RedisServer

URL = "redis://127.0.0.1:6380/0"
PASSWORD = "Kept-0ut-0f-Messages"


def _raises(kind: type[Exception], argument: str, call: Callable[[], object]) -> Exception:
    with pytest.raises(kind) as caught:
        call()
    assert type(caught.value) is kind, f"{type(caught.value).__name__}: {caught.value}"
    assert caught.value.argument == argument  # type: ignore[attr-defined]
    assert str(caught.value).startswith(f"{argument}:")
    return caught.value


FROM_URL: list[Callable[..., object]] = [LockClient.from_url, AsyncLockClient.from_url,
                                         lambda url, **kw: RedlockClient([url, url + "?x", url + "?y"], **kw)]
FROM_URL_IDS = ["sync", "async", "redlock"]


# -- the db in a URL's path ------------------------------------------------------------------------

@pytest.mark.parametrize("from_url", FROM_URL, ids=FROM_URL_IDS)
@pytest.mark.parametrize("tail", ["/abc", "/1/2", "/ 3", "/3x", "/-1", "/0x1", "/db0", "/%2F"])
def test_a_path_that_is_not_a_db_number_is_refused(from_url: Callable[..., object], tail: str) -> None:
    error = _raises(InvalidArgumentError, "db", lambda: from_url(f"redis://:{PASSWORD}@127.0.0.1:6380{tail}"))
    assert PASSWORD not in str(error)


@pytest.mark.parametrize(("url", "db"), [
    ("redis://127.0.0.1:6380", 0),
    ("redis://127.0.0.1:6380/", 0),
    ("redis://127.0.0.1:6380/7", 7),
    ("redis://127.0.0.1:6380/%37", 7),
    ("rediss://127.0.0.1:6380/15", 15),
    ("redis://127.0.0.1:6380/2?db=5", 5),  # the query wins over the path, as in redis-py
    ("unix:///tmp/redis.sock?db=4", 4),
])
def test_db_numbers_in_urls(url: str, db: int) -> None:
    assert LockClient.from_url(url).options.db == db
    assert AsyncLockClient.from_url(url).options.db == db


def test_other_url_mistakes_name_what_is_wrong() -> None:
    _raises(InvalidArgumentError, "db", lambda: LockClient.from_url("redis://127.0.0.1:6380/0?db=-1"))
    _raises(InvalidArgumentError, "url", lambda: LockClient.from_url("redis://127.0.0.1:6380/0?db=two"))
    _raises(InvalidArgumentError, "port", lambda: LockClient.from_url("redis://127.0.0.1:0/0"))
    error = _raises(InvalidArgumentError, "url", lambda: LockClient.from_url(f"redis://:{PASSWORD}@[::1/0"))
    assert PASSWORD not in str(error)
    error = _raises(InvalidArgumentError, "url", lambda: LockClient.from_url(f"redis://:{PASSWORD}@h:99999/0"))
    assert PASSWORD not in str(error)


# -- host, port and db as keywords -----------------------------------------------------------------

BAD_ADDRESSES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"host": None}, InvalidArgumentTypeError, "host"),
    ({"host": 127}, InvalidArgumentTypeError, "host"),
    ({"host": b"localhost"}, InvalidArgumentTypeError, "host"),
    ({"host": ""}, InvalidArgumentError, "host"),
    ({"host": "  "}, InvalidArgumentError, "host"),
    ({"port": "6379"}, InvalidArgumentTypeError, "port"),
    ({"port": 6379.0}, InvalidArgumentTypeError, "port"),
    ({"port": True}, InvalidArgumentTypeError, "port"),
    ({"port": 0}, InvalidArgumentError, "port"),
    ({"port": 65536}, InvalidArgumentError, "port"),
    ({"db": "1"}, InvalidArgumentTypeError, "db"),
    ({"db": -1}, InvalidArgumentError, "db"),
    ({"unix_socket_path": 5}, InvalidArgumentTypeError, "unix_socket_path"),
    ({"unix_socket_path": ""}, InvalidArgumentError, "unix_socket_path"),
    ({"password": b"pw"}, InvalidArgumentTypeError, "password"),
    ({"username": 1}, InvalidArgumentTypeError, "username"),
    ({"ssl": "yes"}, InvalidArgumentTypeError, "ssl"),
    ({"insecure": 1}, InvalidArgumentTypeError, "insecure"),
    ({"ssl_cert_reqs": "sometimes"}, InvalidArgumentError, "ssl_cert_reqs"),
    ({"ssl_cert_reqs": 2}, InvalidArgumentTypeError, "ssl_cert_reqs"),
    ({"ssl_ca_certs": 3}, InvalidArgumentTypeError, "ssl_ca_certs"),
]


@pytest.mark.parametrize(("kwargs", "kind", "argument"), BAD_ADDRESSES)
def test_bad_connection_keywords(kwargs: dict[str, Any], kind: type[Exception], argument: str) -> None:
    _raises(kind, argument, lambda: LockClient(**kwargs))
    _raises(kind, argument, lambda: AsyncLockClient(**kwargs))
    _raises(kind, argument, lambda: ConnectionOptions(**kwargs))
    _raises(kind, argument, lambda: options_from_keywords(**kwargs))
    _raises(kind, argument, lambda: LockClient.from_url(URL, **kwargs))
    _raises(kind, argument, lambda: AsyncLockClient.from_url(URL, **kwargs))
    with redis.Redis(host="127.0.0.1", port=6380) as source:
        _raises(kind, argument, lambda: LockClient.from_redis(source, **kwargs))


def test_paths_may_be_path_objects() -> None:
    options = options_from_keywords(unix_socket_path=Path("/tmp/redis.sock"), ssl=True,
                                    ssl_ca_certs=Path("/tmp/ca.crt"))
    assert options.unix_socket_path == "/tmp/redis.sock" and options.ssl_ca_certs == "/tmp/ca.crt"


# -- redis-py's keyword names ----------------------------------------------------------------------

def test_redis_py_names_as_from_url_keywords() -> None:
    url = "redis://127.0.0.1:6380/0?socket_timeout=3&socket_connect_timeout=4"
    for from_url in (LockClient.from_url, AsyncLockClient.from_url):
        client: Any = from_url(url, socket_timeout=0.5, socket_connect_timeout=0.25)
        assert (client.options.timeout, client.options.connect_timeout) == (0.5, 0.25), "keywords win"
        client = from_url(url, timeout=0.75)
        assert (client.options.timeout, client.options.connect_timeout) == (0.75, 4.0)
    options = LockClient.from_url(URL, path="/tmp/redis.sock", username="u", password=PASSWORD, db=2,
                                  host="10.0.0.1", port=7000).options
    assert (options.unix_socket_path, options.username, options.password, options.db) == \
        ("/tmp/redis.sock", "u", PASSWORD, 2)
    assert (options.host, options.port) == ("10.0.0.1", 7000)


def test_redis_py_tls_keywords() -> None:
    options = LockClient.from_url(URL, ssl=True, ssl_ca_certs="/tmp/ca.crt", ssl_certfile="/tmp/c.crt",
                                  ssl_keyfile="/tmp/c.key", ssl_cert_reqs=ssl.CERT_REQUIRED).options
    assert options.ssl and options.ssl_cert_reqs == "required"
    assert (options.ssl_ca_certs, options.ssl_certfile, options.ssl_keyfile) == \
        ("/tmp/ca.crt", "/tmp/c.crt", "/tmp/c.key")
    for reqs, name in ((ssl.CERT_NONE, "none"), (ssl.CERT_OPTIONAL, "optional"), ("REQUIRED", "required"),
                       (None, "none")):
        options = LockClient.from_url("rediss://127.0.0.1:6380/0", ssl_cert_reqs=reqs,
                                      ssl_check_hostname=False, insecure=True).options
        assert options.ssl_cert_reqs == name
    # redis-py's names do not get around the TLS rules.
    _raises(InvalidArgumentError, "ssl_cert_reqs",
            lambda: LockClient.from_url("rediss://127.0.0.1:6380/0", ssl_cert_reqs=ssl.CERT_NONE))


def test_redis_py_names_in_from_redis_and_redlock() -> None:
    with redis.Redis(host="127.0.0.1", port=6380, socket_timeout=3) as source:
        client = LockClient.from_redis(source, socket_timeout=0.5, socket_connect_timeout=0.25)
        assert (client.options.timeout, client.options.connect_timeout) == (0.5, 0.25)
        assert AsyncLockClient.from_redis(source, socket_timeout=0.5).options.timeout == 0.5
    urls = [f"redis://127.0.0.1:{port}/0" for port in (6380, 6381, 6382)]
    with RedlockClient(urls, socket_timeout=0.5, socket_connect_timeout=0.25) as redlock:
        assert {(m.options.timeout, m.options.connect_timeout) for m in redlock.masters} == {(0.5, 0.25)}


@pytest.mark.parametrize(("ours", "theirs"), [("timeout", "socket_timeout"),
                                              ("connect_timeout", "socket_connect_timeout"),
                                              ("unix_socket_path", "path")])
def test_one_option_under_both_names_is_refused(ours: str, theirs: str) -> None:
    value: object = "/tmp/a.sock" if ours == "unix_socket_path" else 1.0
    calls: list[Callable[[], object]] = [
        lambda: LockClient.from_url(URL, **{ours: value, theirs: value}),
        lambda: AsyncLockClient.from_url(URL, **{theirs: value, ours: value}),
        lambda: options_from_keywords(**{ours: value, theirs: value}),
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentError) as raised:
            call()
        assert ours in str(raised.value) and theirs in str(raised.value)
        assert raised.value.argument in (ours, theirs)


def test_a_bad_value_is_reported_under_the_name_it_was_given() -> None:
    _raises(InvalidArgumentError, "socket_timeout", lambda: LockClient.from_url(URL, socket_timeout=0))
    _raises(InvalidArgumentError, "timeout", lambda: LockClient.from_url(URL, timeout=0))
    _raises(InvalidArgumentTypeError, "path", lambda: options_from_keywords(path=7))


@pytest.mark.parametrize("keyword", ["decode_responses", "socket_timout", "max_conections",
                                     "retry_on_timeout"])
def test_unknown_keywords_are_turbolock_errors(keyword: str) -> None:
    unknown: dict[str, Any] = {keyword: 1}
    calls: list[Callable[[], object]] = [
        lambda: LockClient.from_url(URL, **unknown),
        lambda: AsyncLockClient.from_url(URL, **unknown),
        lambda: RedlockClient([URL, URL + "?a", URL + "?b"], **unknown),
        lambda: options_from_keywords(**unknown),
    ]
    with redis.Redis(host="127.0.0.1", port=6380) as source:
        calls.append(lambda: LockClient.from_redis(source, **unknown))
        for call in calls:
            error = _raises(InvalidArgumentTypeError, keyword, call)
            assert isinstance(error, TypeError) and isinstance(error, LockError)
    assert "did you mean 'socket_timeout'" in str(_raises(
        InvalidArgumentTypeError, "socket_timout", lambda: options_from_keywords(socket_timout=1)))


@pytest.mark.parametrize("client_class", [LockClient, AsyncLockClient], ids=["sync", "async"])
def test_plain_constructors_take_redis_py_names(client_class: Any) -> None:
    client = client_class("127.0.0.1", 6380, socket_timeout=0.5, socket_connect_timeout=0.25)
    assert (client.options.timeout, client.options.connect_timeout) == (0.5, 0.25)
    _raises(InvalidArgumentTypeError, "decode_responses", lambda: client_class(decode_responses=True))


def test_with_changes_checks_like_new_options() -> None:
    options = ConnectionOptions()
    assert options.with_changes(socket_timeout=2).timeout == 2.0
    _raises(InvalidArgumentTypeError, "bogus", lambda: options.with_changes(bogus=1))
    _raises(InvalidArgumentError, "port", lambda: options.with_changes(port=0))


# -- against a real server -------------------------------------------------------------------------

def test_redis_py_names_reach_a_real_server(redis_server: RedisServer, core_name: str,
                                            key_prefix: str) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/%35"  # db 5, percent-encoded
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, socket_timeout=2,
                             socket_connect_timeout=1) as client, \
            redis.Redis(host=redis_server.host, port=redis_server.port, db=5) as raw5:
        assert (client.options.db, client.options.timeout, client.options.connect_timeout) == (5, 2.0, 1.0)
        lease = client.try_acquire("in-db-5", 10)
        assert lease is not None
        assert raw5.get(key_prefix + "in-db-5") == lease.token
        assert client.release(lease)
    with LockClient.from_url(f"unix://{redis_server.unix_socket}", core=core_name, key_prefix=key_prefix,
                             path=redis_server.unix_socket, db=6) as client, \
            redis.Redis(host=redis_server.host, port=redis_server.port, db=6) as raw6:
        lease = client.try_acquire("over-unix", 10)
        assert lease is not None and raw6.get(key_prefix + "over-unix") == lease.token
        assert client.release(lease)


# -- errors name their locks -----------------------------------------------------------------------

ERRORS: list[LockError] = [
    LockError("plain"),
    LockNotOwnedError("lock 'a' is not ours", names=["a"]),
    LockLostError("lost", names=[b"bin"]),
    InvalidArgumentError("ttl", "must be positive", names=["a"]),
    InvalidArgumentTypeError("name", "must be str or bytes"),
    ConnectionError("down", names=("a", "b")),
    TimeoutError("slow", names=["a"]),
    ProtocolError("not RESP"),
    AuthenticationError("refused"),
    ResponseError("OOM", "OOM", names=["a"]),
    OutcomeUnknownError("lost reply", ["a", "b"]),
    AcquireOutcomeUnknownError("lost acquire", ["a"], True, acquired=[], not_sent=["b"]),
    QuorumError("no quorum", ["a"], {"acquired": 1}),
    RedlockNotAcquiredError("not acquired", None, names=["a"]),
]


def test_every_error_has_a_list_of_names() -> None:
    for error in ERRORS:
        assert isinstance(error.names, list), type(error).__name__
    assert LockError("x").names == [] and ProtocolError("x").names == []
    assert ConnectionError("x", names=("a", "b")).names == ["a", "b"]
    assert LockNotOwnedError("x", names="one").names == ["one"], "a single name is not split into letters"
    names: list[str | bytes] = ["a"] * 10
    assert OutcomeUnknownError("x", names).names is names, "a bulk call's list is kept, not copied"


def test_existing_positional_constructors_still_work() -> None:
    error = AcquireOutcomeUnknownError("lost", ["a"], False, ["lease"], ["b"])
    assert (error.names, error.cleaned_up, error.acquired, error.not_sent) == (["a"], False, ["lease"], ["b"])
    assert QuorumError("q", ["a"], "result").result == "result"
    assert ResponseError("r", "WRONGTYPE").code == "WRONGTYPE"
    argument_error = InvalidArgumentError("ttl", "bad")
    assert (argument_error.argument, str(argument_error), argument_error.names) == ("ttl", "ttl: bad", [])


def test_errors_survive_pickling_with_their_names() -> None:
    # Errors cross process boundaries (multiprocessing, concurrent.futures) with every attribute.
    for error in ERRORS:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        assert copy.__dict__ == error.__dict__, type(error).__name__
