"""Bad input: a typed error naming the argument, raised before anything reaches Redis."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import redis

import turbolock
from turbolock import (
    MAX_NAME_BYTES,
    MAX_TTL_MS,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockClient,
    LockError,
)
from turbolock.redis_server import RedisServer


def _commands_processed(raw: redis.Redis) -> int:
    return int(raw.info("stats")["total_commands_processed"])


@pytest.fixture
def nothing_sent(raw: redis.Redis) -> Iterator[None]:
    """Asserts the test sent no command to the server (the INFO calls themselves count one each)."""
    before = _commands_processed(raw)
    yield
    assert _commands_processed(raw) - before == 1, "a command reached Redis despite bad input"


def _raises(kind: type[Exception], argument: str, call: Callable[[], object]) -> Exception:
    with pytest.raises(kind) as caught:
        call()
    assert isinstance(caught.value, LockError)
    assert caught.value.argument == argument  # type: ignore[attr-defined]
    assert str(caught.value).startswith(f"{argument}:")
    return caught.value


BAD_NAMES = [
    ("", InvalidArgumentError),
    (b"", InvalidArgumentError),
    ("x" * (MAX_NAME_BYTES + 1), InvalidArgumentError),
    ("\u00e9" * (MAX_NAME_BYTES // 2 + 1), InvalidArgumentError),  # short in chars, long in UTF-8 bytes
    ("bad\ud800surrogate", InvalidArgumentError),
    (17, InvalidArgumentTypeError),
    (None, InvalidArgumentTypeError),
    (["a"], InvalidArgumentTypeError),
]


@pytest.mark.parametrize(("name", "kind"), BAD_NAMES, ids=[f"name{i}" for i in range(len(BAD_NAMES))])
def test_bad_names(client: LockClient, nothing_sent: None, name: object, kind: type[Exception]) -> None:
    _raises(kind, "name", lambda: client.try_acquire(name, 5))  # type: ignore[arg-type]
    _raises(kind, "name", lambda: client.query(name))  # type: ignore[arg-type]
    _raises(kind, "name", lambda: client.lock(name, 5))  # type: ignore[arg-type]


BAD_TTLS = [
    (None, InvalidArgumentTypeError),
    (0, InvalidArgumentError),
    (0.0, InvalidArgumentError),
    (-1, InvalidArgumentError),
    (True, InvalidArgumentTypeError),
    (math.nan, InvalidArgumentError),
    (math.inf, InvalidArgumentError),
    (0.0005, InvalidArgumentError),
    (1.0005, InvalidArgumentError),
    (MAX_TTL_MS // 1000 + 1, InvalidArgumentError),
    (1e306, InvalidArgumentError),  # finite seconds, infinite milliseconds
    (10**400, InvalidArgumentError),
    (timedelta(microseconds=1500), InvalidArgumentError),
    (timedelta(seconds=-1), InvalidArgumentError),
    ("5", InvalidArgumentTypeError),
]


@pytest.mark.parametrize(("ttl", "kind"), BAD_TTLS, ids=[f"ttl{i}" for i in range(len(BAD_TTLS))])
def test_bad_ttls(client: LockClient, nothing_sent: None, ttl: object, kind: type[Exception]) -> None:
    _raises(kind, "ttl", lambda: client.try_acquire("n", ttl))  # type: ignore[arg-type]
    if ttl is not None:  # a Lock with no ttl takes the default one, renewed
        _raises(kind, "ttl", lambda: client.lock("n", ttl))  # type: ignore[arg-type]
    _raises(kind, "ttl", lambda: client.acquire_many(["a", "b"], ttl))  # type: ignore[arg-type]


def test_a_lock_with_no_ttl_lives_30s_at_a_time_renewed_until_released(client: LockClient) -> None:
    lock = client.lock("watchdog")
    assert lock.ttl == 30 and lock.auto_renew is True
    with lock:
        assert lock.lease is not None and lock.lease.auto_renew and lock.lease.ttl == 30
        assert 29 < lock.remaining() <= 30
    assert client.renewing == 0
    assert client.lock("no-renew", auto_renew=False).auto_renew is False
    assert client.lock("given", 5).auto_renew is False


def test_contradictory_wait_arguments_are_refused(client: LockClient, nothing_sent: None) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        client.lock("n", 5, blocking=False, timeout=0.2)
    assert caught.value.argument == "blocking" and "timeout=0.2" in str(caught.value)
    lock = client.lock("n", 5)
    with pytest.raises(InvalidArgumentError) as caught:
        lock.acquire(blocking=False, timeout=1)
    assert caught.value.argument == "blocking" and "timeout=1" in str(caught.value)
    assert lock.lease is None
    client.lock("n", 5, blocking=False, timeout=0)  # one attempt either way: consistent


@pytest.mark.parametrize(("ttl", "ms"), [(1, 1000), (1.5, 1500), (0.001, 1), (0.003, 3), (0.1 + 0.2, 300),
                                         (timedelta(milliseconds=250), 250),
                                         (MAX_TTL_MS // 1000, MAX_TTL_MS)])
def test_good_ttls_are_sent_as_whole_milliseconds(client: LockClient, ttl: object, ms: int) -> None:
    lease = client.try_acquire("ttl-ok", ttl)  # type: ignore[arg-type]
    assert lease is not None
    assert lease.ttl_ms == ms
    if ms >= 100:  # a 1 ms lock may be gone before we look
        info = client.query("ttl-ok")
        assert info.held and info.remaining is not None and 0 < info.remaining <= ms / 1000
        assert client.release(lease)


@pytest.mark.parametrize("timeout", [-1, -0.001, math.nan, "1"])
def test_bad_timeouts(client: LockClient, nothing_sent: None, timeout: object) -> None:
    kind = InvalidArgumentTypeError if isinstance(timeout, str) else InvalidArgumentError
    _raises(kind, "timeout", lambda: client.lock("n", 5, timeout=timeout))  # type: ignore[arg-type]
    lock = client.lock("n", 5)
    _raises(kind, "timeout", lambda: lock.acquire(timeout=timeout))  # type: ignore[arg-type]


def test_bad_tokens(client: LockClient, nothing_sent: None) -> None:
    _raises(InvalidArgumentError, "token", lambda: client.try_acquire("n", 5, token=b""))
    _raises(InvalidArgumentError, "token", lambda: client.try_acquire("n", 5, token=b"x" * 15))
    _raises(InvalidArgumentTypeError, "token", lambda: client.try_acquire("n", 5, token="x" * 20))  # type: ignore[arg-type]
    _raises(InvalidArgumentError, "token", lambda: client.lock("n", 5, token=b"short"))


def test_missing_and_foreign_leases(client: LockClient, redis_server: RedisServer, raw: redis.Redis) -> None:
    url = redis_server.url
    with LockClient.from_url(url, key_prefix=client.key_prefix, core=client.implementation) as other:
        foreign = other.try_acquire("foreign", 5)
        assert foreign is not None
        before = _commands_processed(raw)
        _raises(InvalidArgumentTypeError, "lease", lambda: client.release(None))  # type: ignore[arg-type]
        _raises(InvalidArgumentTypeError, "lease", lambda: client.extend(None, 5))  # type: ignore[arg-type]
        _raises(InvalidArgumentTypeError, "lease", lambda: client.release("foreign"))  # type: ignore[arg-type]
        _raises(InvalidArgumentError, "lease", lambda: client.release(foreign))
        _raises(InvalidArgumentError, "lease", lambda: client.extend(foreign, 5))
        _raises(InvalidArgumentError, "leases", lambda: client.release_many([foreign]))
        assert _commands_processed(raw) - before == 1
        assert other.query("foreign").held


def test_bulk_input_is_checked_whole_before_sending(client: LockClient, nothing_sent: None) -> None:
    _raises(InvalidArgumentError, "names", lambda: client.acquire_many(["a", "b", "a"], 5))
    _raises(InvalidArgumentError, "names", lambda: client.acquire_many(["a", b"a"], 5))  # same key
    _raises(InvalidArgumentError, "names", lambda: client.acquire_many(["a", "b", ""], 5))
    _raises(InvalidArgumentTypeError, "names", lambda: client.acquire_many(["a", 3], 5))  # type: ignore[list-item]
    _raises(InvalidArgumentTypeError, "names", lambda: client.acquire_many("abc", 5))
    _raises(InvalidArgumentTypeError, "names", lambda: client.query_many({"a", "b"}))  # type: ignore[arg-type]
    token = b"t" * 16
    _raises(InvalidArgumentError, "tokens", lambda: client.acquire_many(["a", "b"], 5, tokens=[token]))
    _raises(InvalidArgumentError, "tokens", lambda: client.acquire_many(["a", "b"], 5, tokens=[token, b"t"]))
    too_many = [b"n"] * (turbolock.MAX_BULK + 1)
    _raises(InvalidArgumentError, "names", lambda: client.acquire_many(too_many, 5))
    _raises(InvalidArgumentError, "names", lambda: client.query_many(too_many))


@pytest.mark.parametrize("names", [["a"], []], ids=["names", "no-names"])
@pytest.mark.parametrize("limit", [None, 1], ids=["bulk", "claim"])
def test_bulk_flags_are_checked_by_type(client: LockClient, nothing_sent: None, names: list[str],
                                        limit: int | None) -> None:
    # A truthy string or 1 for a flag: refused by type even with no names to take (once taken
    # as True, or met only through each name's checks); no lock is taken.
    for bad in ("yes", "no", 1, 0):
        _raises(InvalidArgumentTypeError, "all_or_nothing",
                lambda bad=bad: client.acquire_many(names, 5, all_or_nothing=bad, limit=limit))
        _raises(InvalidArgumentTypeError, "fenced",
                lambda bad=bad: client.acquire_many(names, 5, fenced=bad, limit=limit))


def test_bulk_leases_checked_before_sending(client: LockClient, raw: redis.Redis) -> None:
    result = client.acquire_many(["x", "y"], 5)
    leases = result.acquired
    before = _commands_processed(raw)
    _raises(InvalidArgumentError, "leases", lambda: client.release_many([leases[0], leases[1], leases[0]]))
    _raises(InvalidArgumentTypeError, "leases", lambda: client.release_many([leases[0], None]))  # type: ignore[list-item]
    _raises(InvalidArgumentError, "ttl", lambda: client.extend_many(leases, 0))
    assert _commands_processed(raw) - before == 1
    assert raw.exists(client.key_prefix.decode() + "x", client.key_prefix.decode() + "y") == 2


def test_empty_bulk_input_gives_empty_results(client: LockClient, nothing_sent: None) -> None:
    assert list(client.acquire_many([], 5)) == []
    assert client.release_many([]) == []
    assert client.extend_many([], 5) == []
    assert client.query_many([]) == []


@pytest.mark.parametrize("chunk_size", [0, -1, 10_001, True, 1.5])
def test_bad_chunk_size(redis_server: RedisServer, chunk_size: object) -> None:
    kind = InvalidArgumentTypeError if isinstance(chunk_size, bool | float) else InvalidArgumentError
    _raises(kind, "chunk_size", lambda: LockClient.from_url(redis_server.url, chunk_size=chunk_size))


def test_bad_urls_and_options() -> None:
    _raises(InvalidArgumentError, "url", lambda: LockClient.from_url("http://localhost:6380"))
    _raises(InvalidArgumentError, "url", lambda: LockClient.from_url("localhost:6380"))
    _raises(InvalidArgumentTypeError, "url", lambda: LockClient.from_url(None))  # type: ignore[arg-type]
    _raises(InvalidArgumentError, "ssl_cert_reqs",
            lambda: LockClient.from_url("rediss://localhost:6380?ssl_cert_reqs=none"))
    _raises(InvalidArgumentError, "ssl_check_hostname",
            lambda: LockClient.from_url("rediss://localhost:6380", ssl_check_hostname=False))
    assert LockClient.from_url("rediss://localhost:6380?ssl_cert_reqs=none", insecure=True).options.ssl
    _raises(InvalidArgumentError, "timeout", lambda: LockClient.from_url("redis://localhost:6380", timeout=0))
    _raises(InvalidArgumentError, "connect_timeout",
            lambda: LockClient.from_url("redis://localhost:6380", connect_timeout=math.nan))
    _raises(InvalidArgumentError, "max_connections", lambda: LockClient(max_connections=0))
    _raises(InvalidArgumentError, "core", lambda: LockClient(core="fortran"))
    _raises(InvalidArgumentTypeError, "key_prefix", lambda: LockClient(key_prefix=5))  # type: ignore[arg-type]
    _raises(InvalidArgumentError, "key_prefix", lambda: LockClient(key_prefix="jobs\ud800:"))
    _raises(InvalidArgumentError, "timeout",
            lambda: LockClient.from_url("redis://localhost:6380", timeout=10**400))
    _raises(InvalidArgumentTypeError, "client", lambda: LockClient.from_redis(object()))


def test_binary_non_utf8_names_work(client: LockClient, raw: redis.Redis) -> None:
    name = b"\xff\xfe\x00lock\r\n"
    lease = client.try_acquire(name, 5)
    assert lease is not None
    assert raw.exists(client.key_prefix + name) == 1
    assert client.query(name).held
    assert client.release(lease)
    assert raw.exists(client.key_prefix + name) == 0


def test_longest_name_is_accepted(client: LockClient) -> None:
    lease = client.try_acquire("n" * MAX_NAME_BYTES, 5)
    assert lease is not None
    assert client.release(lease)


def test_a_wait_longer_than_a_float_waits_without_end(client: LockClient) -> None:
    """A whole number of seconds past a float's range is a wait without end, as infinity is (not
    an OverflowError): the free lock is taken at once."""
    lock = client.lock("n", 5, timeout=10**400)
    assert lock.acquire() is True
    lock.release()
    _raises(InvalidArgumentError, "timeout", lambda: client.lock("n", 5, timeout=-(10**400)))


@pytest.mark.parametrize("wrong", [True, 1.0, "2"])
def test_a_count_of_the_wrong_type_is_a_type_error(client: LockClient, nothing_sent: None,
                                                   wrong: object) -> None:
    _raises(InvalidArgumentTypeError, "max_connections",
            lambda: LockClient.from_url("redis://localhost:6380", max_connections=wrong))
    _raises(InvalidArgumentTypeError, "max_renewals",
            lambda: client.lock("n", 5, auto_renew=turbolock.AutoRenew(max_renewals=wrong)))  # type: ignore[arg-type]
