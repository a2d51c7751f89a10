"""Connections against real redis-servers: where to connect (URL schemes, unix sockets, db, redis-py),
what happens when the server is missing, restarts or stops answering, closing, forking, and keeping
tokens out of every repr and message.
"""

from __future__ import annotations

import socket
import time
import traceback
from collections.abc import Callable, Iterator

import pytest
import redis

from _eventually import eventually as _eventually
from _forking import in_forked_child
from _waking import PROMPT, acquire_in_thread, stop_polling
from turbolock import (
    AcquireOutcomeUnknownError,
    ConnectionError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    Lease,
    LockClient,
    LockError,
    LockNotOwnedError,
    OutcomeUnknownError,
    ResponseError,
    TimeoutError,
)
from turbolock.redis_server import RedisServer, free_port

GENEROUS = 10.0
"""Upper bound for "it returned instead of hanging"; never a speed claim."""


def _raw(server: RedisServer, db: int = 0) -> redis.Redis:
    return redis.Redis(host=server.host, port=server.port, db=db)


# -- where to connect ------------------------------------------------------------------------------

def test_unreachable_server_raises_connection_error(core_name: str, key_prefix: str) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, connect_timeout=1,
                             timeout=2) as client:
        calls: list[Callable[[], object]] = [
            lambda: client.try_acquire("x", 10),
            lambda: client.query("x"),
            lambda: client.acquire_many(["x", "y"], 10),
            lambda: client.query_many(["x", "y"]),
            lambda: client.lock("x", 10).acquire(blocking=False),
        ]
        for call in calls:
            started = time.monotonic()
            with pytest.raises(ConnectionError) as raised:
                call()
            assert time.monotonic() - started < GENEROUS
            # Nothing was sent, so the outcome is known: not acquired.
            assert not isinstance(raised.value, OutcomeUnknownError), raised.value
            assert "127.0.0.1" in str(raised.value)
        assert client.pending_cleanup == 0


@pytest.fixture
def never_accepting_port() -> Iterator[int]:
    """A port whose accept queue is full: further connects get no SYN-ACK and hang."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):  # the kernel's "0" backlog still takes a connection or two
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            fillers.append(filler)
            filler.settimeout(0.2)
            try:
                filler.connect(("127.0.0.1", port))
            except OSError:
                break
        else:
            pytest.skip("could not fill the accept queue on this kernel")
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_connect_timeout_bounds_a_connect_that_hangs(never_accepting_port: int, core_name: str,
                                                     key_prefix: str) -> None:
    url = f"redis://127.0.0.1:{never_accepting_port}/0"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, connect_timeout=0.3,
                             timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.query("x")
        elapsed = time.monotonic() - started
        assert 0.25 <= elapsed < GENEROUS, "bounded by connect_timeout, not by the 30 s call timeout"
        with pytest.raises(TimeoutError) as raised:
            client.try_acquire("x", 10)
        assert not isinstance(raised.value, OutcomeUnknownError)
        assert client.pending_cleanup == 0


def test_connect_timeout_bounds_the_select_handshake(own_server: RedisServer, core_name: str,
                                                     key_prefix: str) -> None:
    url = f"redis://127.0.0.1:{own_server.port}/1"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, connect_timeout=0.3,
                             timeout=30) as client:
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                client.query("x")
            assert 0.25 <= time.monotonic() - started < GENEROUS
        finally:
            own_server.resume()
        assert client.query("x").held is False


def test_unix_socket_url(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    url = f"unix://{redis_server.unix_socket}?db=2"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix) as client, \
            _raw(redis_server, db=2) as raw2, _raw(redis_server) as raw0:
        assert client.options.unix_socket_path == redis_server.unix_socket
        assert client.options.db == 2
        lease = client.try_acquire("over-unix", 10)
        assert lease is not None
        assert raw2.get(key_prefix + "over-unix") == lease.token
        assert not raw0.exists(key_prefix + "over-unix")
        assert client.query("over-unix").held
        assert client.release(lease)
        assert not raw2.exists(key_prefix + "over-unix")


def test_unix_socket_from_redis(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    source = redis.Redis(unix_socket_path=redis_server.unix_socket)
    with source, LockClient.from_redis(source, core=core_name, key_prefix=key_prefix) as client:
        assert client.options.unix_socket_path == redis_server.unix_socket
        lease = client.try_acquire("over-unix", 10)
        assert lease is not None
        assert source.get(key_prefix + "over-unix") == lease.token
        assert client.release(lease)


@pytest.mark.parametrize(("url_tail", "kwargs", "db"), [
    ("/3", {}, 3),
    ("/0?db=5", {}, 5),
    ("/3", {"db": 4}, 4),
])
def test_db_is_selected(redis_server: RedisServer, core_name: str, key_prefix: str, url_tail: str,
                        kwargs: dict[str, int], db: int) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}{url_tail}"
    with LockClient.from_url(url, core=core_name, key_prefix=key_prefix, **kwargs) as client, \
            _raw(redis_server, db=db) as raw_db, _raw(redis_server) as raw0:
        assert client.options.db == db
        lease = client.try_acquire("in-a-db", 10)
        assert lease is not None
        assert raw_db.get(key_prefix + "in-a-db") == lease.token
        assert not raw0.exists(key_prefix + "in-a-db")
        bulk = client.acquire_many(["m1", "m2"], 10)
        assert raw_db.exists(key_prefix + "m1", key_prefix + "m2") == 2
        assert client.release_many(bulk.acquired) == [True, True]
        assert client.release(lease)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:6379/0",
    "tcp://127.0.0.1:6379",
    "redis+sentinel://127.0.0.1:26379/mymaster",
    "127.0.0.1:6379",
    "localhost",
    "",
])
def test_unknown_url_scheme(url: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        LockClient.from_url(url)
    assert raised.value.argument == "url"


def test_url_of_the_wrong_type() -> None:
    with pytest.raises(InvalidArgumentTypeError) as raised:
        LockClient.from_url(b"redis://127.0.0.1:6379/0")  # type: ignore[arg-type]
    assert raised.value.argument == "url"


def test_from_redis_takes_over_the_connection_settings() -> None:
    port = free_port()
    source = redis.Redis(host="127.0.0.1", port=port, db=2, username="someone", password="pw-from-redis",
                         socket_timeout=1.5, socket_connect_timeout=0.7)
    with LockClient.from_redis(source) as client:
        options = client.options
        assert (options.host, options.port, options.db) == ("127.0.0.1", port, 2)
        assert (options.username, options.password) == ("someone", "pw-from-redis")
        assert (options.timeout, options.connect_timeout) == (1.5, 0.7)
        assert options.unix_socket_path is None
        assert options.ssl is False
    with LockClient.from_redis(source, timeout=3, db=5) as client:
        assert client.options.timeout == 3
        assert client.options.db == 5
        assert client.options.connect_timeout == 0.7
    source.close()


def test_from_redis_works_against_the_server(redis_server: RedisServer, core_name: str,
                                             key_prefix: str) -> None:
    source = redis.Redis(host=redis_server.host, port=redis_server.port, db=6)
    with source, LockClient.from_redis(source, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("via-redis-py", 10)
        assert lease is not None
        assert source.get(key_prefix + "via-redis-py") == lease.token
        assert client.release(lease)


@pytest.mark.parametrize("username", [None, "default"])
def test_from_redis_takes_over_a_credential_provider(core_name: str, key_prefix: str,
                                                     username: str | None) -> None:
    """redis-py's provider answers ``(password,)`` without a username and ``(username,
    password)`` with one; either way the password reaches the server."""
    from redis.credentials import UsernamePasswordCredentialProvider

    with RedisServer(extra_config=["requirepass provider-pw"]) as server:
        provider = UsernamePasswordCredentialProvider(username=username, password="provider-pw")
        with redis.Redis(port=server.port, credential_provider=provider) as source:
            assert source.ping()
            with LockClient.from_redis(source, core=core_name, key_prefix=key_prefix) as client:
                lease = client.try_acquire("via-provider", 5)
                assert lease is not None and client.release(lease)


def test_from_redis_refuses_other_objects() -> None:
    with pytest.raises(InvalidArgumentTypeError) as raised:
        LockClient.from_redis(object())
    assert raised.value.argument == "client"


# -- restarts and silence --------------------------------------------------------------------------

def test_restart_reconnects_and_forgets_locks(own_server: RedisServer, core_name: str,
                                              key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as client:
        lease = client.try_acquire("before-restart", 60)
        assert lease is not None
        assert client.query("before-restart").held

        own_server.restart()

        assert client.query("before-restart").held is False, "no persistence: the lock is gone"
        assert client.release(lease) is False
        again = client.try_acquire("before-restart", 60)
        assert again is not None
        assert client.release(again) is True


def test_calls_fail_while_down_and_work_once_back(own_server: RedisServer, core_name: str,
                                                  key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, connect_timeout=2,
                             timeout=2) as client:
        assert client.query("x").held is False
        own_server.stop(remove_directory=False)
        try:
            time.sleep(0.01)
            with pytest.raises(ConnectionError):
                client.query("x")
            with pytest.raises(ConnectionError) as raised:
                client.try_acquire("x", 10)
            assert not isinstance(raised.value, OutcomeUnknownError), "the SET never left the client"
            assert client.pending_cleanup == 0
        finally:
            own_server.start()
        lease = client.try_acquire("x", 10)
        assert lease is not None
        assert client.release(lease)


def _pause_during_acquire(server: RedisServer, client: LockClient, name: str) -> AcquireOutcomeUnknownError:
    server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(AcquireOutcomeUnknownError) as raised:
            client.try_acquire(name, 60)
        assert time.monotonic() - started >= client.options.timeout * 0.9
    finally:
        server.resume()
    return raised.value


def test_call_in_flight_when_server_is_paused(own_server: RedisServer, core_name: str,
                                              key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.3) as client, \
            _raw(own_server) as raw:
        warm = client.try_acquire("warm", 10)  # loads the scripts, leaves an idle connection
        assert warm is not None and client.release(warm)
        held = client.try_acquire("held", 60)
        assert held is not None
        _open_idle_connections(client, 8)  # a new connection's handshake would time out instead

        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutError) as raised_timeout:
                client.query("x")
            elapsed = time.monotonic() - started
            assert 0.27 <= elapsed < GENEROUS, "fails by the call's deadline, not before"
            assert "127.0.0.1" in str(raised_timeout.value)

            with pytest.raises(AcquireOutcomeUnknownError) as raised:
                client.try_acquire("maybe-mine", 60)
            error = raised.value
            assert isinstance(error, ConnectionError)
            assert error.names == ["maybe-mine"]
            assert error.cleaned_up is False, "the server is still paused: the release cannot have run"
            assert "maybe-mine" in str(error)
            assert client.pending_cleanup == 1

            started = time.monotonic()
            with pytest.raises(OutcomeUnknownError) as raised_release:
                client.release(held)
            assert time.monotonic() - started < 0.3 + 0.15, "no clean-up ran on top of the call"
            assert raised_release.value.names == ["held"]
            assert client.pending_cleanup == 2
        finally:
            own_server.resume()

        # Released in the background once the server answers again, with no further call.
        assert _eventually(lambda: client.pending_cleanup == 0, 5.0)
        assert not raw.exists(key_prefix + "maybe-mine"), "the maybe-held lock was not released"
        assert not raw.exists(key_prefix + "held"), "the unconfirmed release was not retried"
        lease = client.try_acquire("maybe-mine", 10)
        assert lease is not None, "the name is free again"
        assert client.release(lease)


def test_an_idle_client_releases_its_maybe_held_locks_in_the_background(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.2) as client, \
            _raw(own_server) as raw:
        kept = client.try_acquire("kept", 60)
        assert kept is not None
        _pause_during_acquire(own_server, client, "maybe-mine")
        assert _eventually(lambda: client.pending_cleanup == 0, 5.0), "no call is needed to clean up"
        assert not raw.exists(key_prefix + "maybe-mine")
        assert raw.exists(key_prefix + "kept"), "only the maybe-held lock is released"


def test_a_maybe_held_lock_is_kept_for_its_ttl_only(own_server: RedisServer, core_name: str,
                                                     key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.2) as client:
        assert client.query("warm").held is False
        own_server.pause()
        try:
            with pytest.raises(AcquireOutcomeUnknownError):
                client.try_acquire("short", 0.5)
            assert client.pending_cleanup == 1
            # The server stays silent: past the lock's ttl nothing is left to release.
            assert _eventually(lambda: client.pending_cleanup == 0, 0.5 + 0.5)
        finally:
            own_server.resume()


def _open_idle_connections(client: LockClient, count: int) -> None:
    deadline = time.monotonic() + 5
    conns = [client._pool.get(deadline) for _ in range(count)]
    for conn in conns:
        client._pool.put(conn)


# -- closing ---------------------------------------------------------------------------------------

def _every_call(client: LockClient, lease: Lease) -> list[Callable[[], object]]:
    return [
        lambda: client.try_acquire("y", 10),
        lambda: client.query("x"),
        lambda: client.check(lease),
        lambda: client.acquire_many(["a", "b"], 10),
        lambda: client.query_many(["a", "b"]),
        lambda: client.release_many([lease]),
        lambda: client.extend_many([lease], 10),
        lambda: client.lock("z", 10).acquire(blocking=False),
    ]


def test_calls_after_close_raise_connection_error(redis_server: RedisServer, core_name: str,
                                                  key_prefix: str) -> None:
    client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    lease = client.try_acquire("x", 10)
    assert lease is not None
    client.close()
    client.close()  # idempotent
    calls = [*_every_call(client, lease), lambda: client.release(lease), lambda: client.extend(lease, 10)]
    for call in calls:
        with pytest.raises(ConnectionError):
            call()


def test_release_after_close_is_not_an_unknown_outcome(redis_server: RedisServer, core_name: str,
                                                       key_prefix: str) -> None:
    client = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
    lease = client.try_acquire("x", 10)
    assert lease is not None
    client.close()
    for call in (lambda: client.release(lease), lambda: client.extend(lease, 10)):
        with pytest.raises(ConnectionError) as raised:
            call()
        assert not isinstance(raised.value, OutcomeUnknownError), str(raised.value)
    assert client.pending_cleanup == 0


def test_client_as_context_manager(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        assert isinstance(client, LockClient)
        lease = client.try_acquire("ctx", 10)
        assert lease is not None
        assert client.release(lease)
    with pytest.raises(ConnectionError):
        client.query("ctx")
    with pytest.raises(KeyError), LockClient.from_url(redis_server.url, core=core_name) as other:
        raise KeyError("the block's own error passes through")
    with pytest.raises(ConnectionError):
        other.query("ctx")


# -- fork ------------------------------------------------------------------------------------------

def _client_addresses(raw: redis.Redis) -> set[str]:
    own = raw.client_id()
    return {entry["addr"] for entry in raw.client_list() if int(entry["id"]) != own}


def test_forked_child_gets_its_own_connection(own_server: RedisServer, core_name: str,
                                              key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=5) as client, \
            _raw(own_server) as raw:
        lease = client.try_acquire("parent", 60)
        assert lease is not None
        before = _client_addresses(raw)
        assert len(before) == 1, "the parent has one idle connection"

        def queries() -> None:  # in both: a shared socket would mix up the replies
            for _ in range(100):
                assert client.query("parent").held is True
                assert client.query("free").held is False

        def child() -> str:
            queries()
            child_lease = client.try_acquire("child", 60)
            assert child_lease is not None
            assert client.release(child_lease)
            return "ok"

        assert in_forked_child(child, queries) == "ok"

        assert client.query("child").held is False
        deadline = time.monotonic() + GENEROUS
        while _client_addresses(raw) != before:
            assert time.monotonic() < deadline, "the parent had to reconnect: its connection was damaged"
            time.sleep(0.02)
        assert client.release(lease) is True
        assert _client_addresses(raw) == before


# -- tokens stay hidden ----------------------------------------------------------------------------

TOKEN = b"TOKEN-SECRET-0123456789-ABCDEF"


def _assert_token_hidden(*texts_or_errors: object, token: bytes = TOKEN) -> None:
    forms = [token.decode(), token.hex(), repr(token), repr(token)[2:-1]]
    for item in texts_or_errors:
        if isinstance(item, BaseException):
            texts = [str(item), repr(item), *map(repr, item.args),
                     "".join(traceback.format_exception(type(item), item, item.__traceback__))]
        else:
            texts = [str(item)]
        for text in texts:
            for form in forms:
                assert form not in text, f"the token shows in {text!r}"


def test_tokens_never_shown(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client, \
            LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as other, \
            _raw(redis_server) as raw:
        lease = client.try_acquire("tok", 30, token=TOKEN)
        assert lease is not None and lease.token == TOKEN
        assert raw.get(key_prefix + "tok") == TOKEN
        _assert_token_hidden(repr(lease), str(lease), repr(client))

        lock = client.lock("tok-lock", 30, token=TOKEN)
        _assert_token_hidden(repr(lock))
        lock.acquire()
        _assert_token_hidden(repr(lock), repr(lock.lease))
        lock.release()

        with pytest.raises(InvalidArgumentError) as raised_owner:
            other.release(lease)
        _assert_token_hidden(raised_owner.value)

        # The key turns into a list behind the client's back: the scripts get WRONGTYPE.
        raw.delete(key_prefix + "tok")
        raw.rpush(key_prefix + "tok", TOKEN)
        for call in (lambda: client.release(lease), lambda: client.extend(lease, 10),
                     lambda: client.check(lease)):
            with pytest.raises(ResponseError) as raised_response:
                call()
            assert raised_response.value.code == "WRONGTYPE"
            _assert_token_hidden(raised_response.value)
        raw.delete(key_prefix + "tok")

        expiring = client.lock("tok-expiring", 0.05, token=TOKEN)
        with pytest.raises(LockNotOwnedError) as raised_lost:
            with expiring:
                time.sleep(0.1)
        _assert_token_hidden(raised_lost.value)


@pytest.mark.parametrize("token", [b"SHORT-SECRET", b"LONG-SECRET-" * 100, "STRING-SECRET-TOKEN-xyz"])
def test_bad_tokens_are_not_quoted(redis_server: RedisServer, core_name: str, key_prefix: str,
                                   token: bytes | str) -> None:
    secret = token.encode() if isinstance(token, str) else token
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        for call in (lambda: client.try_acquire("bad", 10, token=token),  # type: ignore[arg-type]
                     lambda: client.lock("bad", 10, token=token)):  # type: ignore[arg-type]
            with pytest.raises(LockError) as raised:
                call()
            assert isinstance(raised.value, InvalidArgumentError | InvalidArgumentTypeError)
            assert raised.value.argument == "token"
            _assert_token_hidden(raised.value, token=secret[:12])


def test_tokens_hidden_in_outcome_unknown_errors(own_server: RedisServer, core_name: str,
                                                 key_prefix: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.15) as client:
        lease = client.try_acquire("tok", 60, token=TOKEN)
        assert lease is not None
        _open_idle_connections(client, 8)
        own_server.pause()
        try:
            with pytest.raises(AcquireOutcomeUnknownError) as raised_acquire:
                client.try_acquire("tok-2", 60, token=TOKEN[::-1])
            with pytest.raises(OutcomeUnknownError) as raised_release:
                client.release(lease)
            with pytest.raises(OutcomeUnknownError) as raised_extend:
                client.extend(lease, 60)
        finally:
            own_server.resume()
        _assert_token_hidden(raised_acquire.value, token=TOKEN[::-1])
        _assert_token_hidden(raised_release.value, raised_extend.value)


@pytest.mark.timing
def test_a_forked_child_waits_with_its_own_subscriber(own_server: RedisServer, core_name: str,
                                                      key_prefix: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # The parent's subscriber (thread and socket) is not the child's: the child's blocking
    # acquire makes its own and is woken by the parent's release (polling is off: only a
    # wake-up can hand the lock over within the wait); the parent's subscriber keeps working.
    stop_polling(monkeypatch)
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=5) as client:
        held = client.try_acquire("forked", 60)
        assert held is not None
        assert not client.lock("forked", 60).acquire(timeout=0.3)  # the parent's subscriber exists
        parent_waker = client._waker()

        def child() -> str:
            lock = client.lock("forked", 60)
            assert lock.acquire(timeout=10)
            assert client._waker() is parent_waker and client._waker().connects == 1  # made anew
            lock.release()
            return "ok"

        def release_when_the_child_waits() -> None:
            time.sleep(1.0)  # the child waits, subscribed by now
            assert client.release(held)

        assert in_forked_child(child, release_when_the_child_waits) == "ok"
        again = client.try_acquire("forked", 60)
        assert again is not None  # the child released it
        thread, done = acquire_in_thread(client.lock("forked", 60), 10)
        time.sleep(0.3)
        released = time.monotonic()
        assert client.release(again)
        thread.join(10)
        assert done and done[0] - released < PROMPT, done
        assert parent_waker.connects == 1  # the parent's own subscriber served both waits
