"""``replicas_ack``: an acquire waits (``WAIT``) until that many replicas have the lock; one they
did not acknowledge in time is released again and reported, never handed out as safe. A master
with one replica; the replica is SIGSTOPped to make it miss writes, and a client without the
option shows that the same pause goes unnoticed otherwise (the negative control)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from _netfaults import paused
from _raw import raw_connection
from turbolock import (
    AcquireOutcomeUnknownError,
    ConnectionError,
    InvalidArgumentError,
    LockClient,
    NotDurableError,
    RedlockClient,
)
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_sentinel import RedisSentinel

REPLICAS_TIMEOUT = 0.1


@pytest.fixture(scope="module")
def replicated() -> Iterator[RedisSentinel]:
    """A master and one replica in sync (no Sentinel watches them)."""
    with RedisSentinel(replicas=1, sentinels=0) as made:
        yield made


@pytest.fixture(params=FRONTS)
def make_client(request: pytest.FixtureRequest, replicated: RedisSentinel, core_name: str,
                key_prefix: str) -> Iterator[Callable[..., Any]]:
    """``make_client(**options)``: a LockClient, or an AsyncLockClient driven by ``Blocking``."""
    url = replicated.master.url
    fronts = Fronts(request.param, partial(LockClient.from_url, url), partial(AsyncLockClient.from_url, url),
                    core=core_name, key_prefix=key_prefix, timeout=2.0)
    yield fronts.make
    fronts.close()


@pytest.fixture
def master_raw(replicated: RedisSentinel) -> Iterator[redis.Redis]:
    yield from raw_connection(replicated.master)


def test_acquires_the_replica_acknowledged_are_granted(make_client: Callable[..., Any], key_prefix: str,
                                                       master_raw: redis.Redis) -> None:
    client = make_client(replicas_ack=1, replicas_timeout=REPLICAS_TIMEOUT)
    lease = client.try_acquire("one", 10)
    assert lease is not None
    result = client.acquire_many([f"m{i}" for i in range(2500)], 10)
    assert result.all_acquired and result.not_durable == []
    lock = client.lock("object", 10)
    lock.acquire()
    lock.release()
    assert master_raw.get(key_prefix.encode() + lease.key) == lease.token
    assert client.release(lease) and all(client.release_many(result.acquired))


def test_a_paused_replica_makes_every_acquire_not_durable_and_released(
        replicated: RedisSentinel, make_client: Callable[..., Any], key_prefix: str,
        master_raw: redis.Redis) -> None:
    names = [f"m{i}" for i in range(2500)]
    client = make_client(replicas_ack=1, replicas_timeout=REPLICAS_TIMEOUT)
    control = make_client()
    prefix = key_prefix.encode()
    with paused(replicated.replicas[0]):
        started = time.monotonic()
        with pytest.raises(NotDurableError) as raised:
            client.try_acquire("one", 10)
        single_took = time.monotonic() - started
        result = client.acquire_many(names, 10)
        with pytest.raises(NotDurableError):
            client.lock("object", 10).acquire()
        everything = client.acquire_many(["x1", "x2"], 10, all_or_nothing=True)
        # The negative control: the same pause, without replicas_ack, goes unnoticed.
        unnoticed = control.acquire_many([f"c{i}" for i in range(100)], 10)
    assert raised.value.names == ["one"] and "one" in str(raised.value)
    assert REPLICAS_TIMEOUT <= single_took < REPLICAS_TIMEOUT + 0.5
    assert result.acquired == [] and sorted(result.not_durable) == sorted(names)
    assert not result.all_acquired and result.not_acquired == []
    assert everything.acquired == [] and sorted(everything.not_durable) == ["x1", "x2"]
    assert unnoticed.all_acquired and unnoticed.not_durable == []
    released = [prefix + n.encode() for n in ["one", "object", "x1", "x2", *names]]
    assert eventually(lambda: master_raw.exists(*released) == 0, 5.0), "not-durable locks left held"
    assert control.release_many(unnoticed.acquired) == [True] * 100


def test_more_replicas_than_exist_is_never_durable(make_client: Callable[..., Any], key_prefix: str,
                                                  master_raw: redis.Redis) -> None:
    client = make_client(replicas_ack=2, replicas_timeout=REPLICAS_TIMEOUT)
    with pytest.raises(NotDurableError, match="2 replicas"):
        client.try_acquire("one", 10)
    assert eventually(lambda: not master_raw.exists(key_prefix + "one"), 5.0)


def test_claims_with_replicas_ack_are_refused_before_anything_is_sent(
        make_client: Callable[..., Any], key_prefix: str, master_raw: redis.Redis) -> None:
    client = make_client(replicas_ack=1)
    with pytest.raises(InvalidArgumentError, match="limit"):
        client.acquire_many(["a", "b"], 10, limit=1)
    assert master_raw.keys(key_prefix + "*") == []


@pytest.mark.parametrize(("options", "argument"), [
    ({"replicas_ack": -1}, "replicas_ack"),
    ({"replicas_ack": "1"}, "replicas_ack"),
    ({"replicas_ack": True}, "replicas_ack"),
    ({"replicas_ack": 1, "replicas_timeout": 0}, "replicas_timeout"),
    ({"replicas_ack": 1, "replicas_timeout": 5.0, "timeout": 5.0}, "replicas_timeout"),
])
def test_bad_replica_options_are_refused_by_name(options: dict[str, object], argument: str) -> None:
    with pytest.raises((InvalidArgumentError, TypeError)) as raised:
        LockClient(**options)  # type: ignore[arg-type]
    assert getattr(raised.value, "argument", None) == argument


def test_replica_options_from_a_url() -> None:
    client = LockClient.from_url("redis://127.0.0.1:1/0?replicas_ack=2&replicas_timeout=0.25")
    assert (client.options.replicas_ack, client.options.replicas_timeout) == (2, 0.25)
    with pytest.raises(InvalidArgumentError, match="replicas_ack"):
        LockClient.from_url("redis://127.0.0.1:1/0?replicas_ack=two")


def test_redlock_refuses_replicas_ack() -> None:
    urls = [f"redis://127.0.0.1:{port}" for port in (1, 2, 3)]
    with pytest.raises(InvalidArgumentError, match="replicas_ack"):
        RedlockClient(urls, replicas_ack=1)


def test_replicas_timeout_is_not_checked_against_timeout_without_replicas_ack() -> None:
    assert LockClient(timeout=0.05).options.replicas_ack == 0  # the default 0.1 s is not in the way
    with pytest.raises(InvalidArgumentError, match="replicas_timeout"):
        LockClient(timeout=0.05, replicas_ack=1)


def test_acquires_keep_their_deadline_when_the_master_stops_answering(
        replicated: RedisSentinel, make_client: Callable[..., Any]) -> None:
    # WAIT goes out with the acquire: a master that stops answering must not hold the call past
    # its deadline. The first call was written on a working connection: "maybe held", never "not
    # acquired"; the next ones need a new connection, whose handshake fails typed in time.
    client = make_client(replicas_ack=1, replicas_timeout=REPLICAS_TIMEOUT, timeout=0.5, connect_timeout=0.5)
    assert client.try_acquire("warm", 10) is not None
    calls = ((AcquireOutcomeUnknownError, lambda: client.try_acquire("one", 10)),
             (ConnectionError, lambda: client.acquire_many(["a", "b"], 10)),
             (ConnectionError, lambda: client.try_acquire("two", 10)))
    with paused(replicated.master):
        for error, call in calls:
            started = time.monotonic()
            with pytest.raises(error):
                call()
            assert time.monotonic() - started < 0.5 + 0.3
