"""ACL users: the least a lock client needs, credentials in URLs and from redis-py, and secrets kept out
of every repr and message.

The minimum, found by dropping one command at a time (``test_each_command_is_needed``):

    ACL SETUSER locker on >password ~turbolock:* -@all
        +set +pttl +evalsha +script|load +get +del +pexpire

``get``, ``del`` and ``pexpire`` are called by the release/extend/check scripts, and Redis 7
checks a script's calls against the caller's ACL. ``+select`` is needed too when the client
uses a db other than 0. AUTH needs no permission. On a server with ``SET ... IFEQ`` (Valkey 8.1,
Redis 8.4) extend and extend_many send that instead of a script: they need no ``+pexpire``
there (the renewal rounds of auto-renewed locks still do).
"""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Iterator

import pytest
import redis

from _raw import raw_connection
from turbolock import (
    AuthenticationError,
    ConnectionError,
    InvalidArgumentError,
    LockClient,
    LockError,
    ResponseError,
)
from turbolock._wire import set_ifeq
from turbolock.redis_server import RedisServer, free_port

PASSWORD = "Sup3r-Secret-Pa55word"
WRONG_PASSWORD = "Wr0ng-Guess-Pa55word"
MINIMUM = ["+set", "+pttl", "+evalsha", "+script|load", "+get", "+del", "+pexpire"]


def _offers_set_ifeq(raw: redis.Redis) -> bool:
    return set_ifeq.offers(raw.execute_command("HELLO", "2"))


def _user(name: str, commands: list[str]) -> str:
    return f"user {name} on >{PASSWORD} ~turbolock:* -@all {' '.join(commands)}"


def _minus_name(command: str) -> str:
    return "minus-" + command.strip("+").replace("|", "-")


@pytest.fixture(scope="module")
def acl_server() -> Iterator[RedisServer]:
    users = [_user("locker", MINIMUM), _user("locker-db", [*MINIMUM, "+select"])]
    users += [_user(_minus_name(drop), [c for c in MINIMUM if c != drop]) for drop in MINIMUM]
    with RedisServer(extra_config=users) as server:
        yield server


@pytest.fixture
def acl_raw(acl_server: RedisServer) -> Iterator[redis.Redis]:
    """The default user (no password, all commands): an observer behind the locker's back."""
    yield from raw_connection(acl_server)


@pytest.fixture
def acl_prefix() -> str:
    """Inside the user's key pattern, and apart from other tests."""
    return f"turbolock:{uuid.uuid4().hex[:12]}:"


def _url(server: RedisServer, user: str = "locker", password: str = PASSWORD, db: int = 0) -> str:
    return f"redis://{user}:{password}@127.0.0.1:{server.port}/{db}"


def _every_operation(client: LockClient, raw: redis.Redis) -> None:
    lease = client.try_acquire("acl-lock", 30)
    assert lease is not None
    assert raw.get(client.key_prefix + b"acl-lock") == lease.token
    assert client.try_acquire("acl-lock", 30) is None
    assert client.query("acl-lock").held
    assert client.check(lease) is not None
    assert client.extend(lease, 40)
    assert client.release(lease)
    result = client.acquire_many(["a", "b", "c"], 10)
    assert result.all_acquired
    assert [info.held for info in client.query_many(["a", "b", "c", "d"])] == [True, True, True, False]
    assert client.extend_many(result.acquired, 20) == [True, True, True]
    assert client.release_many(result.acquired) == [True, True, True]
    assert client.try_acquire("b", 30) is not None
    refused = client.acquire_many(["a", "b", "c"], 10, all_or_nothing=True)
    assert not refused.all_acquired
    assert not raw.exists(client.key_prefix + b"a"), "all_or_nothing left a lock behind"
    with client.lock("object", 10, timeout=1) as lock:
        assert lock.owned()
        lock.extend()
    # After SCRIPT FLUSH the client loads its scripts again (the user needs +script|load for that).
    lease = client.try_acquire("after-flush", 30)
    assert lease is not None
    raw.script_flush()
    assert client.release(lease)


def test_minimal_user_via_url(acl_server: RedisServer, acl_raw: redis.Redis, core_name: str,
                              acl_prefix: str) -> None:
    with LockClient.from_url(_url(acl_server), core=core_name, key_prefix=acl_prefix) as client:
        assert client.options.username == "locker"
        _every_operation(client, acl_raw)


def test_minimal_user_with_default_key_prefix(acl_server: RedisServer, acl_raw: redis.Redis,
                                              core_name: str) -> None:
    name = f"default-prefix-{uuid.uuid4().hex[:8]}"
    with LockClient.from_url(_url(acl_server), core=core_name) as client:
        assert client.key_prefix == b"turbolock:"
        lease = client.try_acquire(name, 10)
        assert lease is not None
        assert acl_raw.exists(f"turbolock:{name}")
        assert client.release(lease)


def test_minimal_user_via_from_redis(acl_server: RedisServer, acl_raw: redis.Redis, core_name: str,
                                     acl_prefix: str) -> None:
    source = redis.Redis(host="127.0.0.1", port=acl_server.port, username="locker", password=PASSWORD)
    with source, LockClient.from_redis(source, core=core_name, key_prefix=acl_prefix) as client:
        assert client.options.username == "locker"
        assert client.options.password == PASSWORD
        _every_operation(client, acl_raw)


def test_minimal_user_via_keywords(acl_server: RedisServer, acl_raw: redis.Redis, core_name: str,
                                   acl_prefix: str) -> None:
    with LockClient("127.0.0.1", acl_server.port, username="locker", password=PASSWORD, core=core_name,
                    key_prefix=acl_prefix) as client:
        _every_operation(client, acl_raw)


@pytest.mark.parametrize("dropped", MINIMUM)
def test_each_command_is_needed(acl_server: RedisServer, acl_raw: redis.Redis, core_name: str,
                                acl_prefix: str, dropped: str) -> None:
    url = _url(acl_server, user=_minus_name(dropped))
    acl_raw.script_flush()  # so that every script must be loaded by this user, whatever ran before
    with LockClient.from_url(url, core=core_name, key_prefix=acl_prefix) as client:
        if dropped == "+pexpire" and _offers_set_ifeq(acl_raw):
            _every_operation(client, acl_raw)  # extends go as SET ... IFEQ: no script calls PEXPIRE
            return
        with pytest.raises(ResponseError) as raised:
            _every_operation(client, acl_raw)
    # NOPERM when the client calls it, ERR when a script does.
    assert raised.value.code in ("NOPERM", "ERR")


def test_other_db_needs_select(acl_server: RedisServer, core_name: str, acl_prefix: str) -> None:
    with LockClient.from_url(_url(acl_server, user="locker-db", db=3), core=core_name,
                             key_prefix=acl_prefix) as client, \
            redis.Redis(host="127.0.0.1", port=acl_server.port, db=3) as raw3:
        lease = client.try_acquire("in-db-3", 10)
        assert lease is not None
        assert raw3.exists(acl_prefix + "in-db-3")
        assert client.release(lease)


def test_select_refused_is_not_reported_as_bad_credentials(acl_server: RedisServer, core_name: str,
                                                           acl_prefix: str) -> None:
    with LockClient.from_url(_url(acl_server, db=3), core=core_name, key_prefix=acl_prefix) as client:
        with pytest.raises(LockError) as raised:
            client.query("x")
    assert not isinstance(raised.value, AuthenticationError), str(raised.value)
    assert isinstance(raised.value, ResponseError) and raised.value.code == "NOPERM"


def test_refused_script_load_is_a_response_error_on_release(acl_server: RedisServer, acl_raw: redis.Redis,
                                                            core_name: str, acl_prefix: str) -> None:
    url = _url(acl_server, user=_minus_name("+script|load"))
    acl_raw.script_flush()
    with LockClient.from_url(url, core=core_name, key_prefix=acl_prefix) as client:
        lease = client.try_acquire("x", 30)
        assert lease is not None
        calls = [lambda: client.extend(lease, 10), lambda: client.release(lease)]
        if _offers_set_ifeq(acl_raw):
            assert client.extend(lease, 10) is True  # SET ... IFEQ: no script to load
            calls = calls[1:]
        for call in calls:
            with pytest.raises(ResponseError) as raised:
                call()
            assert raised.value.code == "NOPERM"
        assert client.pending_cleanup == 0, "nothing ran on the server; there is nothing to retry"


def _assert_no_secret(exc: BaseException, *secrets: str) -> None:
    shown = [str(exc), repr(exc), *map(str, exc.args),
             "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))]
    for secret in secrets:
        for text in shown:
            assert secret not in text, f"a secret shows in: {text!r}"


@pytest.mark.parametrize("user", ["locker", "nobody-such"])
def test_wrong_credentials_raise_authentication_error(acl_server: RedisServer, core_name: str,
                                                      acl_prefix: str, user: str) -> None:
    url = _url(acl_server, user=user, password=WRONG_PASSWORD)
    with LockClient.from_url(url, core=core_name, key_prefix=acl_prefix) as client:
        calls = [lambda: client.try_acquire("x", 10), lambda: client.query("x"),
                 lambda: client.acquire_many(["x", "y"], 10), lambda: client.query_many(["x"])]
        for call in calls:
            with pytest.raises(AuthenticationError) as raised:
                call()
            _assert_no_secret(raised.value, WRONG_PASSWORD, PASSWORD)
        assert client.pending_cleanup == 0, "nothing was sent, so nothing may be maybe-held"


def test_password_required_but_missing(core_name: str, key_prefix: str) -> None:
    with RedisServer(extra_config=[f"requirepass {PASSWORD}"]) as server:
        with LockClient.from_url(server.url, core=core_name, key_prefix=key_prefix) as client:
            with pytest.raises(AuthenticationError) as raised:
                client.try_acquire("x", 10)
            assert "NOAUTH" in str(raised.value)
            with pytest.raises(AuthenticationError):
                client.query("x")
        legacy = f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"
        with LockClient.from_url(legacy, core=core_name, key_prefix=key_prefix) as client:
            assert client.options.username is None
            lease = client.try_acquire("x", 10)
            assert lease is not None
            assert client.release(lease)


def test_keys_outside_the_prefix_are_refused(acl_server: RedisServer, acl_raw: redis.Redis,
                                             core_name: str) -> None:
    prefix = f"elsewhere:{uuid.uuid4().hex[:8]}:"
    with LockClient.from_url(_url(acl_server), core=core_name, key_prefix=prefix) as client:
        calls = [lambda: client.try_acquire("x", 10), lambda: client.query("x"),
                 lambda: client.acquire_many(["x", "y"], 10), lambda: client.query_many(["x", "y"])]
        for call in calls:
            with pytest.raises(ResponseError) as raised:
                call()
            assert raised.value.code == "NOPERM"
            _assert_no_secret(raised.value, PASSWORD)
        assert client.pending_cleanup == 0
    assert not acl_raw.keys(prefix + "*"), "a key outside the user's pattern was written"


def test_password_never_shown(acl_server: RedisServer, core_name: str, acl_prefix: str) -> None:
    with LockClient.from_url(_url(acl_server), core=core_name, key_prefix=acl_prefix) as client:
        for text in (repr(client), str(client), repr(client.options), str(client.options)):
            assert PASSWORD not in text
        assert client.options.password == PASSWORD
    source = redis.Redis(host="127.0.0.1", port=acl_server.port, username="locker", password=PASSWORD)
    with LockClient.from_redis(source) as client:
        assert PASSWORD not in repr(client) and PASSWORD not in repr(client.options)
    with LockClient("127.0.0.1", acl_server.port, username="locker", password=PASSWORD) as client:
        assert PASSWORD not in repr(client) and PASSWORD not in repr(client.options)

    # Nothing listens here: the connection error names the address, never the credentials.
    unreachable = f"redis://locker:{PASSWORD}@127.0.0.1:{free_port()}/0"
    with LockClient.from_url(unreachable, core=core_name, connect_timeout=2) as client:
        with pytest.raises(ConnectionError) as raised:
            client.query("x")
        _assert_no_secret(raised.value, PASSWORD)

    bad_urls = [
        f"redis://locker:{PASSWORD}@127.0.0.1:notaport/0",
        f"redis://locker:{PASSWORD}@127.0.0.1:99999/0",
        f"rediss://locker:{PASSWORD}@127.0.0.1:6380/0?ssl_cert_reqs=none",
        f"redis://locker:{PASSWORD}@127.0.0.1:6380/0?socket_timeout=abc",
        f"redis://locker:{PASSWORD}@127.0.0.1:6380/0?socket_timeout=-1",
        f"http://locker:{PASSWORD}@127.0.0.1:6380/0",
    ]
    for url in bad_urls:
        with pytest.raises(InvalidArgumentError) as raised_arg:
            LockClient.from_url(url)
        _assert_no_secret(raised_arg.value, PASSWORD)
