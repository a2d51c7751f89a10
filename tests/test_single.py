"""Single locks: the exact semantics of acquire, release, extend, check and query on a real server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient, ResponseError
from turbolock.redis_server import RedisServer


def _key(client: LockClient, name: str) -> bytes:
    return client.key_prefix + name.encode()


def test_acquire_is_set_nx_px_with_a_random_128_bit_token(client: LockClient, raw: redis.Redis) -> None:
    lease = client.try_acquire("order:1", 10)
    assert lease is not None
    stored = raw.get(_key(client, "order:1"))
    assert stored == lease.token and len(stored) == 16
    assert 9000 < raw.pttl(_key(client, "order:1")) <= 10000
    assert client.try_acquire("order:1", 10) is None
    assert raw.get(_key(client, "order:1")) == lease.token


def test_tokens_are_distinct(client: LockClient) -> None:
    leases = [client.try_acquire(f"t{i}", 5) for i in range(500)]
    tokens = {lease.token for lease in leases if lease is not None}
    assert len(tokens) == 500


def test_user_token_is_the_stored_value(client: LockClient, raw: redis.Redis) -> None:
    token = b"job-7f3a-0123456789abcdef"
    lease = client.try_acquire("job", 5, token=token)
    assert lease is not None and lease.token == token
    assert raw.get(_key(client, "job")) == token


def test_release_deletes_only_our_own_key(client: LockClient, raw: redis.Redis) -> None:
    lease = client.try_acquire("acct", 5)
    assert lease is not None
    assert client.release(lease) is True
    assert raw.exists(_key(client, "acct")) == 0
    assert client.release(lease) is False  # already gone
    raw.set(_key(client, "acct"), b"someone-else-token", px=5000)
    assert client.release(lease) is False
    assert raw.get(_key(client, "acct")) == b"someone-else-token"


def test_extend_resets_ttl_only_when_ours(client: LockClient, raw: redis.Redis) -> None:
    lease = client.try_acquire("shard", 1)
    assert lease is not None
    assert client.extend(lease, 30) is True
    assert 29000 < raw.pttl(_key(client, "shard")) <= 30000
    assert lease.ttl_ms == 30000 and 29 < lease.valid_for() <= 30
    raw.set(_key(client, "shard"), b"other", px=5000)
    assert client.extend(lease, 60) is False
    assert raw.pttl(_key(client, "shard")) <= 5000
    assert lease.ttl_ms == 30000


def test_expired_lock_is_free_and_old_holder_cannot_touch_new_one(client: LockClient) -> None:
    first = client.try_acquire("short", 0.05)
    assert first is not None
    time.sleep(0.12)
    assert client.query("short").held is False
    second = client.try_acquire("short", 5)
    assert second is not None
    assert client.release(first) is False
    assert client.extend(first, 5) is False
    assert client.check(first) is None
    assert client.check(second) is not None
    assert client.release(second) is True


def test_query_and_check(client: LockClient, raw: redis.Redis) -> None:
    assert client.query("q") == (False, None)
    lease = client.try_acquire("q", 2)
    assert lease is not None
    info = client.query("q")
    assert info.held is True and info.remaining is not None and 1.5 < info.remaining <= 2.0
    assert len(info) == 2  # held and remaining only: never the token
    remaining = client.check(lease)
    assert remaining is not None and 1.5 < remaining <= 2.0
    raw.delete(_key(client, "q"))
    assert client.check(lease) is None


def test_scripts_reload_after_script_flush(client: LockClient, raw: redis.Redis) -> None:
    lease = client.try_acquire("flush", 5)
    assert lease is not None
    raw.script_flush()
    assert client.extend(lease, 10) is True
    raw.script_flush()
    assert client.check(lease) is not None
    raw.script_flush()
    assert client.release(lease) is True
    assert raw.exists(_key(client, "flush")) == 0


def test_wrongtype_is_a_response_error(client: LockClient, raw: redis.Redis) -> None:
    lease = client.try_acquire("typed", 5)
    assert lease is not None
    raw.delete(_key(client, "typed"))
    raw.rpush(_key(client, "typed"), b"x")
    with pytest.raises(ResponseError) as caught:
        client.release(lease)
    assert "WRONGTYPE" in str(caught.value)
    assert lease.token.hex() not in str(caught.value)
    assert raw.lrange(_key(client, "typed"), 0, -1) == [b"x"]


@pytest.fixture
def oom_server(own_server: RedisServer) -> Iterator[RedisServer]:
    admin = redis.Redis(port=own_server.port)
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    yield own_server
    admin.close()


def test_oom_is_a_response_error_and_nothing_is_held(oom_server: RedisServer, core_name: str) -> None:
    with LockClient.from_url(oom_server.url, core=core_name) as client:
        with pytest.raises(ResponseError) as caught:
            client.try_acquire("full", 5)
        assert caught.value.code == "OOM"
        assert "full" in str(caught.value)
        assert client.pending_cleanup == 0


def test_readonly_replica_is_a_response_error(redis_server: RedisServer, core_name: str) -> None:
    with RedisServer(extra_config=[f"replicaof {redis_server.host} {redis_server.port}"]) as replica:
        with LockClient.from_url(replica.url, core=core_name) as client:
            with pytest.raises(ResponseError) as caught:
                client.try_acquire("ro", 5)
            assert caught.value.code == "READONLY"


def test_blocking_acquire_waits_for_release(client: LockClient) -> None:
    holder = client.try_acquire("wait", 0.3)
    assert holder is not None
    lock = client.lock("wait", 5, timeout=5)
    started = time.monotonic()
    assert lock.acquire() is True
    assert time.monotonic() - started >= 0.2  # it had to wait for the expiry
    lock.release()


def test_blocking_acquire_gives_up_near_its_timeout(client: LockClient) -> None:
    holder = client.try_acquire("busy", 30)
    assert holder is not None
    lock = client.lock("busy", 5)
    started = time.monotonic()
    assert lock.acquire(timeout=0.3) is False
    elapsed = time.monotonic() - started
    # never early; late by at most one backoff step (<= 0.2 s) plus a generous allowance for a busy machine
    assert 0.3 <= elapsed < 1.5
    assert client.release(holder)


def test_timeout_zero_is_exactly_one_try(client: LockClient, raw: redis.Redis) -> None:
    holder = client.try_acquire("once", 30)
    assert holder is not None
    before = int(raw.info("commandstats")["cmdstat_set"]["calls"])
    assert client.lock("once", 5, timeout=0).acquire() is False
    assert client.lock("once", 5).acquire(blocking=False) is False
    assert int(raw.info("commandstats")["cmdstat_set"]["calls"]) - before == 2
