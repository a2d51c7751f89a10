"""Expiry race: A's short lock expires, B takes it; A's release and extend must not touch B's lock."""

from __future__ import annotations

import time

import pytest
import redis

from turbolock import LockClient, LockNotOwnedError
from turbolock.redis_server import RedisServer

from ._harness import CTX, Workers
from ._workers import expiry_race_taker

pytestmark = pytest.mark.slow


def _wait_until_free(client: LockClient, name: str, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while client.query(name).held:
        assert time.monotonic() < deadline, f"{name!r} never expired"
        time.sleep(0.01)


def test_expired_holder_cannot_release_the_new_holders_lock(redis_server: RedisServer, core_name: str,
                                                            key_prefix: str, raw: redis.Redis) -> None:
    go, acquired, release_now = CTX.Event(), CTX.Event(), CTX.Event()
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as a, \
            Workers(expiry_race_taker,
                    [(redis_server.url, core_name, key_prefix, "job", go, acquired, release_now)]) as b:
        lease_a = a.try_acquire("job", 0.3)
        assert lease_a is not None
        go.set()  # B now spins on the lock A holds
        assert acquired.wait(timeout=20), "B never got the lock after A's expired"
        assert lease_a.valid_for() == 0.0, "B got the lock while A's lease was still valid"

        assert a.release(lease_a) is False
        assert a.extend(lease_a, 60) is False
        assert a.check(lease_a) is None
        info = a.query("job")
        assert info.held
        assert info.remaining is not None and 20 < info.remaining <= 30, "A's extend touched B's lock"
        assert raw.get(key_prefix + "job") != lease_a.token

        release_now.set()
        (report,) = b.results()
    assert report["check_before_release"] is not None
    assert report["released"] is True
    assert not raw.exists(key_prefix + "job")


def test_lock_object_of_expired_holder_raises_not_owned(redis_server: RedisServer, core_name: str,
                                                        key_prefix: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as a_client, \
            LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as b_client:
        lock_a = a_client.lock("job", 0.2)
        assert lock_a.acquire(blocking=False)
        lock_b = b_client.lock("job", 30)
        assert lock_b.acquire(timeout=10), "B never got the lock after A's expired"

        assert not lock_a.owned()
        assert lock_a.remaining() == 0.0
        with pytest.raises(LockNotOwnedError) as raised:
            lock_a.extend()
        assert "job" in str(raised.value)
        # A failed extend keeps the lease, lost: a release now is refused by the server (the
        # token is A's, the lock B's), the loss told again, never B's lock deleted.
        with pytest.raises(LockNotOwnedError):
            lock_a.release()
        assert lock_b.owned()
        assert b_client.query("job").held
        lock_b.release()
        assert not b_client.query("job").held


def test_lock_object_release_after_expiry_raises_not_owned(redis_server: RedisServer, core_name: str,
                                                           key_prefix: str) -> None:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as a_client, \
            LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as b_client:
        lock_a = a_client.lock("job", 0.2)
        lock_b = b_client.lock("job", 30)
        with pytest.raises(LockNotOwnedError):
            with lock_a:
                _wait_until_free(b_client, "job")
                assert lock_b.acquire(blocking=False)
        assert lock_a.lease is None
        assert lock_b.owned(), "A's release deleted B's lock"
        remaining = lock_b.remaining()
        assert 20 < remaining <= 30
        lock_b.release()
        assert not b_client.query("job").held


def test_block_error_wins_over_lost_lock(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    """The block's own exception is what the caller sees when the lock was lost meanwhile."""
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as a_client, \
            LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as b_client:
        lock_b = b_client.lock("job", 30)
        with pytest.raises(KeyError):
            with a_client.lock("job", 0.2):
                _wait_until_free(b_client, "job")
                assert lock_b.acquire(blocking=False)
                raise KeyError("the block's own failure")
        assert lock_b.owned()
        lock_b.release()
