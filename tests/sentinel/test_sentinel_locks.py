"""SentinelLockClient: every lock call on the master the Sentinels name, bad arguments refused
before anything is sent, an unknown service or unreachable Sentinels failing in time with typed
errors, and no secret in its repr."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from turbolock import ConnectionError, InvalidArgumentError, InvalidArgumentTypeError
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.redis_server import free_port
from turbolock.sentinel import SentinelLockClient

MakeClient = Callable[..., SentinelLockClient]


def _raw(group: RedisSentinel, port: int) -> redis.Redis:
    node = group.node_at(port)
    return redis.Redis(host=node.host, port=node.port)


def test_every_call_goes_to_the_master_the_sentinels_name(
        sentinel_group: RedisSentinel, make_sentinel_client: MakeClient, key_prefix: str) -> None:
    client = make_sentinel_client(sentinel_group)
    master = _raw(sentinel_group, sentinel_group.master_port())
    replica = _raw(sentinel_group, sentinel_group.replicas[0].port)
    try:
        lease = client.try_acquire("order:1", 10)
        assert lease is not None
        assert master.get(key_prefix + "order:1") == lease.token
        assert client.try_acquire("order:1", 10) is None
        assert client.extend(lease, 20) and 19 < (client.check(lease) or 0) <= 20
        deadline = time.monotonic() + 5
        while replica.get(key_prefix + "order:1") != lease.token:  # replicated, never written there
            assert time.monotonic() < deadline, "the replica never got the lock"
            time.sleep(0.01)
        assert client.release(lease) and master.get(key_prefix + "order:1") is None
        names = [f"seat:{i}" for i in range(200)]
        result = client.acquire_many(names, 10)
        assert len(result.acquired) == 200
        assert sum(info.held for info in client.query_many(names)) == 200
        assert master.exists(*[key_prefix + name for name in names]) == 200
        assert client.release_many(result.acquired) == [True] * 200
        with client.lock("nightly") as lock:  # no ttl: 30 s renewed
            assert client.renewing == 1 and lock.owned()
        assert client.renewing == 0 and not client.query("nightly").held
    finally:
        master.close()
        replica.close()


def test_bad_arguments_are_refused_before_anything_is_sent(sentinel_group: RedisSentinel) -> None:
    cases: list[tuple[Callable[[], object], type[Exception], str]] = [
        (lambda: SentinelLockClient([], "turbolock"), InvalidArgumentError, "sentinels"),
        (lambda: SentinelLockClient("redis://127.0.0.1:26379", "turbolock"), InvalidArgumentTypeError,
         "sentinels"),
        (lambda: SentinelLockClient([("127.0.0.1", "26379")], "turbolock"), InvalidArgumentTypeError,  # type: ignore[list-item]
         "sentinels"),
        (lambda: SentinelLockClient(sentinel_group.sentinel_urls, 7), InvalidArgumentTypeError,  # type: ignore[arg-type]
         "service_name"),
        (lambda: SentinelLockClient(sentinel_group.sentinel_urls, " "), InvalidArgumentError, "service_name"),
        # Each call raised a bare UnicodeEncodeError as it asked the Sentinels (found in review).
        (lambda: SentinelLockClient(sentinel_group.sentinel_urls, "svc\udcff"), InvalidArgumentError,
         "service_name"),
        (lambda: AsyncSentinelLockClient(sentinel_group.sentinel_urls, "svc\udcff"), InvalidArgumentError,
         "service_name"),
        # A bad URL in the list was said to be a bad "url", an argument there is none of (found in review).
        (lambda: SentinelLockClient(("127.0.0.1", 26379), "turbolock"), InvalidArgumentError,  # type: ignore[arg-type]
         "sentinels"),
        (lambda: SentinelLockClient(["sentinel-a:26379"], "turbolock"), InvalidArgumentError, "sentinels"),
        (lambda: AsyncSentinelLockClient(["http://127.0.0.1:26379"], "turbolock"), InvalidArgumentError,
         "sentinels"),
        (lambda: ClusterLockClient(startup_nodes=["127.0.0.1:7000"]), InvalidArgumentError, "startup_nodes"),
        (lambda: SentinelLockClient(sentinel_group.sentinel_urls, "turbolock", unix_socket_path="/tmp/r"),
         InvalidArgumentError, "unix_socket_path"),
        (lambda: SentinelLockClient.from_url("redis://127.0.0.1:26379"), InvalidArgumentError, "url"),
        # Named as the Sentinels' own, not the master's (found in review).
        (lambda: SentinelLockClient(sentinel_group.sentinel_urls, "turbolock", sentinel_password=5),  # type: ignore[arg-type]
         InvalidArgumentTypeError, "sentinel_password"),
        (lambda: SentinelLockClient(sentinel_group.sentinel_urls, "turbolock", sentinel_username=b"u"),  # type: ignore[arg-type]
         InvalidArgumentTypeError, "sentinel_username"),
        (lambda: AsyncSentinelLockClient(sentinel_group.sentinel_urls, "turbolock", sentinel_password=5),  # type: ignore[arg-type]
         InvalidArgumentTypeError, "sentinel_password"),
        # The master's address is the Sentinels' to name; these were bare TypeErrors (found in review).
        (lambda: SentinelLockClient(sentinel_group.sentinel_urls, "turbolock", host="10.0.0.1"),
         InvalidArgumentTypeError, "host"),
        (lambda: AsyncSentinelLockClient(sentinel_group.sentinel_urls, "turbolock", port=6380),
         InvalidArgumentTypeError, "port"),
        (lambda: SentinelLockClient.from_redis(redis.Redis(port=1)), InvalidArgumentError, "redis_client"),
        (lambda: AsyncSentinelLockClient.from_redis(redis.Redis(port=1)), InvalidArgumentError,
         "redis_client"),
    ]
    for make, error, argument in cases:
        with pytest.raises(error) as info:
            make()
        assert getattr(info.value, "argument", None) == argument


def test_an_unknown_service_or_no_sentinel_fails_in_time(
        sentinel_group: RedisSentinel, make_sentinel_client: MakeClient) -> None:
    unknown = SentinelLockClient(sentinel_group.sentinel_urls, "no-such-service", timeout=1.0)
    nobody = SentinelLockClient([("127.0.0.1", free_port()), ("127.0.0.1", free_port())], "turbolock",
                                timeout=0.5, connect_timeout=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(ConnectionError) as info:
            unknown.try_acquire("a", 10)
        assert "no-such-service" in str(info.value) and time.monotonic() - started < 1.5
        started = time.monotonic()
        with pytest.raises(ConnectionError) as info:
            nobody.try_acquire("a", 10)
        assert "no Sentinel gave the master" in str(info.value) and time.monotonic() - started < 1.0
    finally:
        unknown.close()
        nobody.close()


def test_no_secret_in_its_repr_or_errors(sentinel_group: RedisSentinel) -> None:
    client = SentinelLockClient(sentinel_group.sentinel_urls, "turbolock", password="master-secret-1",
                                sentinel_password="sentinel-secret-2", timeout=1.0)
    try:
        assert "turbolock" in repr(client)
        with pytest.raises(ConnectionError) as info:  # the Sentinels have no password: AUTH is refused
            client.try_acquire("a", 10)
        for text in (repr(client), str(info.value)):
            assert "master-secret-1" not in text and "sentinel-secret-2" not in text
    finally:
        client.close()
