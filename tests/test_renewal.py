"""Auto-renewal on a real server: renewed locks outlive their ttl, lost locks are always signalled."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from _eventually import gone_within as _gone_within
from turbolock import (
    AutoRenew,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    Lease,
    LockClient,
    LockLostError,
)
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # renewals must land within ttls of a second or two

# Short ttls keep the tests quick; the call timeout must stay below renew_before (ttl / 3).
TTL = 0.6
CALL_TIMEOUT = 0.15


@pytest.fixture
def renewing_client(redis_server: RedisServer, core_name: str, key_prefix: str) -> Iterator[LockClient]:
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix,
                             timeout=CALL_TIMEOUT) as client:
        yield client


def _wait_for(predicate: object, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return bool(predicate())  # type: ignore[operator]


def test_renewed_lock_outlives_its_ttl_many_times(renewing_client: LockClient, raw: redis.Redis) -> None:
    lease = renewing_client.try_acquire("long-job", TTL, auto_renew=True)
    assert lease is not None and lease.auto_renew
    key = renewing_client.key_prefix + b"long-job"
    time.sleep(TTL * 5)
    assert raw.get(key) == lease.token
    assert not lease.is_lost and lease.valid_for() > 0
    lease.ensure_held()
    assert lease.renewal is not None and lease.renewal.renewals >= 5
    assert renewing_client.release(lease) is True
    assert raw.exists(key) == 0
    assert renewing_client.renewing == 0


def test_deleted_or_overwritten_key_is_reported_lost(renewing_client: LockClient, raw: redis.Redis) -> None:
    lost: list[str | bytes] = []

    def on_lost(lease: Lease) -> None:
        lost.append(lease.name)

    deleted = renewing_client.try_acquire("deleted", TTL, auto_renew=True, on_lost=on_lost)
    stolen = renewing_client.try_acquire("stolen", TTL, auto_renew=True, on_lost=on_lost)
    kept = renewing_client.try_acquire("kept", TTL, auto_renew=True, on_lost=on_lost)
    assert deleted and stolen and kept
    raw.delete(renewing_client.key_prefix + b"deleted")
    raw.set(renewing_client.key_prefix + b"stolen", b"thief", px=60000)
    # Within one renewal interval (ttl - renew_before), plus a tick.
    assert deleted.lost.wait(TTL) and stolen.lost.wait(TTL)
    # The event is set first, then on_lost runs (on the renewer thread).
    assert _wait_for(lambda: len(lost) == 2, TTL)
    assert sorted(lost) == ["deleted", "stolen"]  # type: ignore[type-var]
    assert deleted.valid_for() == 0.0
    with pytest.raises(LockLostError, match="stolen"):
        stolen.ensure_held()
    assert raw.get(renewing_client.key_prefix + b"stolen") == b"thief"
    assert not kept.is_lost
    assert renewing_client.renewing == 1


def test_server_restart_without_persistence_is_reported_lost(own_server: RedisServer, core_name: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, timeout=CALL_TIMEOUT) as client:
        lease = client.try_acquire("restart", TTL, auto_renew=True)
        assert lease is not None
        own_server.restart()
        assert lease.lost.wait(TTL * 2)
        assert lease.is_lost
        with pytest.raises(LockLostError):
            lease.ensure_held()


def test_server_down_makes_the_lock_lost_at_its_safe_until(own_server: RedisServer, core_name: str) -> None:
    with LockClient.from_url(own_server.url, core=core_name, timeout=CALL_TIMEOUT) as client:
        lease = client.try_acquire("down", TTL, auto_renew=True)
        assert lease is not None
        own_server.pause()
        try:
            paused_at = time.monotonic()
            assert lease.lost.wait(TTL * 3)
            # Indeterminate renewals are retried, and the loss is declared at the local expiry, not before.
            assert time.monotonic() >= min(lease.expires_at, paused_at)
            assert "could not be renewed" in str(lease.lost_reason)
        finally:
            own_server.resume()


def test_a_failing_on_lost_callback_does_not_stop_the_renewer(renewing_client: LockClient,
                                                              raw: redis.Redis) -> None:
    def explode(lease: Lease) -> None:
        raise RuntimeError("callback bug")

    first = renewing_client.try_acquire("cb1", TTL, auto_renew=True, on_lost=explode)
    other = renewing_client.try_acquire("cb2", TTL, auto_renew=True)
    assert first and other
    raw.delete(renewing_client.key_prefix + b"cb1")
    assert first.lost.wait(TTL)
    time.sleep(TTL * 2)
    assert not other.is_lost and raw.get(renewing_client.key_prefix + b"cb2") == other.token


def test_release_during_renewal_leaves_nothing_behind(renewing_client: LockClient, raw: redis.Redis) -> None:
    names = [f"r{i}" for i in range(300)]
    result = renewing_client.acquire_many(names, TTL, auto_renew=True)
    assert len(result.acquired) == 300
    # Release in the middle of renewal rounds, many times over.
    deadline = time.monotonic() + TTL * 2
    leases = result.acquired
    while leases and time.monotonic() < deadline:
        batch, leases = leases[:20], leases[20:]
        assert renewing_client.release_many(batch) == [True] * len(batch)
        time.sleep(0.01)
    renewing_client.release_many(leases)
    assert renewing_client.renewing == 0
    time.sleep(TTL)
    assert raw.exists(*[renewing_client.key_prefix + n.encode() for n in names]) == 0
    assert result.lost == []


def test_ten_thousand_renewed_locks_with_some_stolen(renewing_client: LockClient, raw: redis.Redis) -> None:
    names = [f"shard:{i}" for i in range(10_000)]
    lost_names: list[str | bytes] = []
    lock = threading.Lock()

    def on_lost(lease: Lease) -> None:
        with lock:
            lost_names.append(lease.name)

    result = renewing_client.acquire_many(names, 1.5, auto_renew=AutoRenew(renew_before=0.6), on_lost=on_lost)
    assert len(result.acquired) == 10_000
    stolen = {names[i] for i in range(0, 10_000, 97)}
    deleted = {names[i] for i in range(5, 10_000, 101)} - stolen
    pipe = raw.pipeline(transaction=False)
    for name in stolen:
        pipe.set(renewing_client.key_prefix + name.encode(), b"thief", px=60000)
    for name in deleted:
        pipe.delete(renewing_client.key_prefix + name.encode())
    pipe.execute()
    time.sleep(1.5 * 2.5)
    assert set(result.lost) == stolen | deleted
    assert set(lost_names) == stolen | deleted
    alive = [lease for lease in result.acquired if not lease.is_lost]
    assert len(alive) == 10_000 - len(stolen | deleted)
    held = renewing_client.query_many([lease.name for lease in alive])
    assert all(info.held for info in held)
    values = raw.mget([renewing_client.key_prefix + lease.key for lease in alive[:500]])
    assert values == [lease.token for lease in alive[:500]]


def test_renewal_limits_let_the_lock_expire_and_report_it(renewing_client: LockClient,
                                                          raw: redis.Redis) -> None:
    lease = renewing_client.try_acquire("limited", TTL, auto_renew=AutoRenew(max_renewals=2))
    assert lease is not None
    assert lease.lost.wait(TTL * 5)
    assert lease.renewal is not None and lease.renewal.renewals == 2
    assert "limit" in str(lease.lost_reason)
    # Signalled no later than the lease's own expiry, so the key may outlive the signal a little.
    assert lease.valid_for() == 0.0
    assert _gone_within(raw, renewing_client.key_prefix + b"limited", 0.5)
    held = renewing_client.try_acquire("held-max", TTL, auto_renew=AutoRenew(max_hold=TTL * 2))
    assert held is not None
    started = time.monotonic()
    assert held.lost.wait(TTL * 6)
    # Renewed at least once (it outlived one ttl), never past max_hold.
    assert TTL < time.monotonic() - started <= TTL * 2 + 0.3
    assert held.renewal is not None and held.renewal.renewals >= 1


def test_close_stops_renewal_and_releases(redis_server: RedisServer, core_name: str, key_prefix: str,
                                          raw: redis.Redis) -> None:
    url = redis_server.url
    client = LockClient.from_url(url, core=core_name, key_prefix=key_prefix, timeout=CALL_TIMEOUT)
    result = client.acquire_many([f"c{i}" for i in range(50)], TTL, auto_renew=True)
    assert len(result.acquired) == 50
    renewer = client._renewer_instance
    assert renewer is not None and renewer._thread is not None and renewer._thread.is_alive()
    client.close()
    assert raw.exists(*[key_prefix + f"c{i}" for i in range(50)]) == 0
    assert not renewer._thread.is_alive()


def test_lock_object_with_auto_renew(renewing_client: LockClient, raw: redis.Redis) -> None:
    with renewing_client.lock("obj", TTL, auto_renew=True) as lock:
        time.sleep(TTL * 3)
        lock.ensure_held()
        assert lock.valid_for() > 0 and not lock.lost.is_set()
    assert raw.exists(renewing_client.key_prefix + b"obj") == 0
    with pytest.raises(LockLostError):
        lock.ensure_held()


def test_bad_renewal_settings_are_refused_before_sending(renewing_client: LockClient,
                                                         raw: redis.Redis) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        renewing_client.try_acquire("x", 0.12)  # fine without renewal
        renewing_client.try_acquire("y", 0.12, auto_renew=True)  # ttl/3 = 0.04 s: no room to renew
    assert caught.value.argument == "renew_before"
    assert "smallest ttl is 0.15s" in str(caught.value)
    assert raw.exists(renewing_client.key_prefix + b"y") == 0
    with pytest.raises(InvalidArgumentError) as caught:
        renewing_client.try_acquire("z", TTL, auto_renew=AutoRenew(renew_before=TTL))
    assert caught.value.argument == "renew_before"
    with pytest.raises(InvalidArgumentError) as caught:
        renewing_client.try_acquire("z", TTL, auto_renew=AutoRenew(max_renewals=-1))
    assert caught.value.argument == "max_renewals"
    with pytest.raises(InvalidArgumentTypeError) as caught_type:
        renewing_client.try_acquire("z", TTL, auto_renew="yes")  # type: ignore[arg-type]
    assert caught_type.value.argument == "auto_renew"
    with pytest.raises(InvalidArgumentError) as caught:
        renewing_client.try_acquire("z", TTL, on_lost=print)
    assert caught.value.argument == "on_lost"
    assert raw.exists(renewing_client.key_prefix + b"z") == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_never_renews_or_releases_the_parents_locks(renewing_client: LockClient,
                                                                 raw: redis.Redis) -> None:
    lease = renewing_client.try_acquire("parent", TTL, auto_renew=True)
    assert lease is not None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            try:
                renewing_client.release(lease)
                code = 2
            except InvalidArgumentError as exc:
                code = 0 if "another process" in str(exc) else 3
            if renewing_client.renewing != 0:
                code = 4
            own = renewing_client.try_acquire("child", TTL)
            if own is None or not renewing_client.release(own):
                code = 5
        except BaseException:
            code = 6
        os.write(write_end, bytes([code]))
        os._exit(0)
    os.close(write_end)
    code = os.read(read_end, 1)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert code == b"\x00"
    time.sleep(TTL * 2)
    assert raw.get(renewing_client.key_prefix + b"parent") == lease.token
    assert not lease.is_lost
    assert renewing_client.release(lease)


def test_any_ttl_a_user_would_pick_renews_with_default_settings(redis_server: RedisServer, core_name: str,
                                                                key_prefix: str, raw: redis.Redis) -> None:
    # The call deadline (5 s by default) no longer bounds the renewal margin: a round gets its
    # own deadline from the lock's expiry.
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        for ttl in (0.3, 1, 10, 14):
            with client.lock(f"default-{ttl}", ttl, auto_renew=True) as lock:
                assert lock.lease is not None and lock.lease.auto_renew
        lease = client.try_acquire("short", 0.3, auto_renew=True)
        assert lease is not None
        time.sleep(1.0)  # several ttls
        lease.ensure_held()
        assert raw.exists(client.key_prefix + b"short") == 1
        assert client.release(lease)
