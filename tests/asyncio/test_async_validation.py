"""Bad input: the asyncio client raises exactly what the blocking one raises (type, argument,
message), before anything reaches Redis; and no token ever shows in a repr or a message."""

from __future__ import annotations

import asyncio
import math
import traceback
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from async_helpers import Runner

from turbolock import (
    MAX_BULK,
    MAX_NAME_BYTES,
    AcquireOutcomeUnknownError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockClient,
    LockError,
    LockNotOwnedError,
    OutcomeUnknownError,
    ResponseError,
)
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

TOKEN = b"SECRET-TOKEN-0123456789abcdef"


@pytest.fixture
def pair(redis_server: RedisServer, core_name: str,
         key_prefix: str) -> Iterator[tuple[LockClient, AsyncLockClient]]:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as sync_client:
        yield sync_client, AsyncLockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)


def _commands_processed(raw: redis.Redis) -> int:
    return int(raw.info("stats")["total_commands_processed"])


def _caught(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except LockError as exc:
        return exc
    raise AssertionError("no error raised")


async def _caught_async(call: Callable[[], Awaitable[Any]]) -> BaseException:
    try:
        await call()
    except LockError as exc:
        return exc
    raise AssertionError("no error raised")


BAD_NAMES: list[object] = ["", b"", "x" * (MAX_NAME_BYTES + 1), "bad\ud800surrogate", 17, None, ["a"]]
BAD_TTLS: list[object] = [None, 0, -1, True, math.nan, math.inf, 0.0005, 10**9, timedelta(microseconds=1500),
                          "5"]
BAD_TIMEOUTS: list[object] = [-1, math.nan, "1"]


def _cases(sync: Any, client: Any, lease_sync: Any, lease_async: Any,
           foreign: Any) -> list[tuple[str, Any, Any]]:
    """(what, blocking call, coroutine-returning call) pairs that must fail the same way."""
    cases: list[tuple[str, Any, Any]] = []
    for name in BAD_NAMES:
        cases += [
            (f"try_acquire name={name!r}", lambda n=name: sync.try_acquire(n, 5),
             lambda n=name: client.try_acquire(n, 5)),
            (f"query name={name!r}", lambda n=name: sync.query(n), lambda n=name: client.query(n)),
            (f"lock name={name!r}", lambda n=name: sync.lock(n, 5), lambda n=name: _now(client.lock, n, 5)),
        ]
    for ttl in BAD_TTLS:
        cases += [
            (f"try_acquire ttl={ttl!r}", lambda t=ttl: sync.try_acquire("n", t),
             lambda t=ttl: client.try_acquire("n", t)),
            *([] if ttl is None else [  # a Lock with no ttl takes the default one, renewed
                (f"lock ttl={ttl!r}", lambda t=ttl: sync.lock("n", t),
                 lambda t=ttl: _now(client.lock, "n", t))]),
            (f"acquire_many ttl={ttl!r}", lambda t=ttl: sync.acquire_many(["a"], t),
             lambda t=ttl: client.acquire_many(["a"], t)),
            (f"extend ttl={ttl!r}", lambda t=ttl: sync.extend(lease_sync, t),
             lambda t=ttl: client.extend(lease_async, t)),
            (f"extend_many ttl={ttl!r}", lambda t=ttl: sync.extend_many([lease_sync], t),
             lambda t=ttl: client.extend_many([lease_async], t)),
        ]
    for timeout in BAD_TIMEOUTS:
        cases += [
            (f"lock timeout={timeout!r}", lambda t=timeout: sync.lock("n", 5, timeout=t),
             lambda t=timeout: _now(client.lock, "n", 5, timeout=t)),
            (f"acquire timeout={timeout!r}", lambda t=timeout: sync.lock("n", 5).acquire(timeout=t),
             lambda t=timeout: client.lock("n", 5).acquire(timeout=t)),
        ]
    token = b"t" * 16
    cases += [
        ("short token", lambda: sync.try_acquire("n", 5, token=b"x" * 15),
         lambda: client.try_acquire("n", 5, token=b"x" * 15)),
        ("str token", lambda: sync.try_acquire("n", 5, token="x" * 20),
         lambda: client.try_acquire("n", 5, token="x" * 20)),
        ("lock token", lambda: sync.lock("n", 5, token=b"short"),
         lambda: _now(client.lock, "n", 5, token=b"short")),
        ("blocking", lambda: sync.lock("n", 5, blocking=1), lambda: _now(client.lock, "n", 5, blocking=1)),
        ("release None", lambda: sync.release(None), lambda: client.release(None)),
        ("extend None", lambda: sync.extend(None, 5), lambda: client.extend(None, 5)),
        ("check str", lambda: sync.check("x"), lambda: client.check("x")),
        ("release foreign", lambda: sync.release(foreign), lambda: client.release(foreign)),
        ("release_many foreign", lambda: sync.release_many([foreign]),
         lambda: client.release_many([foreign])),
        ("release_many twice", lambda: sync.release_many([lease_sync, lease_sync]),
         lambda: client.release_many([lease_async, lease_async])),
        ("release_many None", lambda: sync.release_many([lease_sync, None]),
         lambda: client.release_many([lease_async, None])),
        ("duplicate names", lambda: sync.acquire_many(["a", "b", "a"], 5),
         lambda: client.acquire_many(["a", "b", "a"], 5)),
        ("same key", lambda: sync.acquire_many(["a", b"a"], 5), lambda: client.acquire_many(["a", b"a"], 5)),
        ("empty name in bulk", lambda: sync.acquire_many(["a", ""], 5),
         lambda: client.acquire_many(["a", ""], 5)),
        ("int name in bulk", lambda: sync.acquire_many(["a", 3], 5),
         lambda: client.acquire_many(["a", 3], 5)),
        ("str names", lambda: sync.acquire_many("abc", 5), lambda: client.acquire_many("abc", 5)),
        ("set names", lambda: sync.query_many({"a"}), lambda: client.query_many({"a"})),
        ("tokens count", lambda: sync.acquire_many(["a", "b"], 5, tokens=[token]),
         lambda: client.acquire_many(["a", "b"], 5, tokens=[token])),
        ("tokens short", lambda: sync.acquire_many(["a", "b"], 5, tokens=[token, b"t"]),
         lambda: client.acquire_many(["a", "b"], 5, tokens=[token, b"t"])),
        ("too many", lambda: sync.query_many([b"n"] * (MAX_BULK + 1)),
         lambda: client.query_many([b"n"] * (MAX_BULK + 1))),
        ("on_lost without renew", lambda: sync.try_acquire("n", 5, on_lost=print),
         lambda: client.try_acquire("n", 5, on_lost=print)),
    ]
    return cases


async def _now(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return function(*args, **kwargs)


def test_bad_input_fails_exactly_like_the_blocking_client(arun_asyncio: Runner,
                                                          pair: tuple[LockClient, AsyncLockClient],
                                                          redis_server: RedisServer,
                                                          raw: redis.Redis) -> None:
    sync, client = pair
    lease_sync = sync.try_acquire("held", 30)
    with LockClient.from_url(redis_server.url, key_prefix=sync.key_prefix) as other:
        foreign = other.try_acquire("foreign", 30)

    async def body() -> None:
        lease_async = await client.try_acquire("held-async", 30)
        before = _commands_processed(raw)
        cases = _cases(sync, client, lease_sync, lease_async, foreign)
        for what, blocking, asynchronous in cases:
            expected = _caught(blocking)
            got = await _caught_async(asynchronous)
            assert type(got) is type(expected), what
            assert str(got) == str(expected), what
            assert getattr(got, "argument", None) == getattr(expected, "argument", None), what
            assert isinstance(got, InvalidArgumentError | InvalidArgumentTypeError), what
        assert _commands_processed(raw) - before == 1, "a command reached Redis despite bad input"
        assert len(cases) > 90
        await client.close()

    arun_asyncio(body)


def test_bad_client_settings_fail_like_the_blocking_client() -> None:
    for kwargs in ({"max_connections": 0}, {"max_connections": True}, {"chunk_size": 0}, {"chunk_size": 1.5},
                   {"core": "fortran"}, {"key_prefix": 5}, {"timeout": 0}, {"connect_timeout": math.nan},
                   {"port": 0}, {"db": -1}):
        expected = _caught(lambda kw=kwargs: LockClient(**kw))
        got = _caught(lambda kw=kwargs: AsyncLockClient(**kw))
        assert type(got) is type(expected) and str(got) == str(expected), kwargs
    for url in ("http://localhost:6380", "localhost:6380", None, "rediss://localhost:6380?ssl_cert_reqs=none"):
        expected = _caught(lambda u=url: LockClient.from_url(u))
        got = _caught(lambda u=url: AsyncLockClient.from_url(u))
        assert type(got) is type(expected) and str(got) == str(expected), url
    expected = _caught(lambda: LockClient.from_redis(object()))
    got = _caught(lambda: AsyncLockClient.from_redis(object()))
    assert type(got) is type(expected) and str(got) == str(expected)


def _assert_token_hidden(*items: object, token: bytes = TOKEN) -> None:
    forms = [token.decode(), repr(token), token.hex(), repr(token)[2:-1]]
    for item in items:
        if isinstance(item, BaseException):
            texts = [str(item), repr(item),
                     "".join(traceback.format_exception(type(item), item, item.__traceback__))]
        else:
            texts = [str(item)]
        for text in texts:
            for form in forms:
                assert form not in text, f"the token shows in {text!r}"


def test_tokens_never_shown(arun_asyncio: Runner, own_server: RedisServer, core_name: str, key_prefix: str,
                            own_raw: redis.Redis) -> None:
    async def body() -> None:
        async with AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix,
                                            timeout=0.15) as client, \
                AsyncLockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as other:
            lease = await client.try_acquire("tok", 30, token=TOKEN)
            assert lease is not None and lease.token == TOKEN
            assert own_raw.get(key_prefix + "tok") == TOKEN
            _assert_token_hidden(repr(lease), str(lease), repr(client))
            lock = client.lock("tok-lock", 30, token=TOKEN)
            await lock.acquire()
            _assert_token_hidden(repr(lock), repr(lock.lease))
            await lock.release()
            _assert_token_hidden(await _caught_async(lambda: other.release(lease)))

            own_raw.delete(key_prefix + "tok")
            own_raw.rpush(key_prefix + "tok", TOKEN)
            for call in (lambda: client.release(lease), lambda: client.extend(lease, 10),
                         lambda: client.check(lease)):
                error = await _caught_async(call)
                assert isinstance(error, ResponseError) and error.code == "WRONGTYPE"
                _assert_token_hidden(error)
            own_raw.delete(key_prefix + "tok")

            error = await _caught_async(lambda: _expiring(client))
            assert isinstance(error, LockNotOwnedError)
            _assert_token_hidden(error)

            lease = await client.try_acquire("tok", 60, token=TOKEN)
            assert lease is not None
            own_server.pause()
            try:
                # Together on the warm connection: a new one's handshake would fail before sending.
                acquire_error, release_error = await asyncio.gather(
                    _caught_async(lambda: client.try_acquire("tok-2", 60, token=TOKEN[::-1])),
                    _caught_async(lambda: client.release(lease)))
            finally:
                own_server.resume()
            assert isinstance(acquire_error, AcquireOutcomeUnknownError)
            assert isinstance(release_error, OutcomeUnknownError)
            _assert_token_hidden(acquire_error, token=TOKEN[::-1])
            _assert_token_hidden(release_error)

    arun_asyncio(body)


async def _expiring(client: AsyncLockClient) -> None:
    import asyncio

    async with client.lock("tok-expiring", 0.05, token=TOKEN):
        await asyncio.sleep(0.1)
