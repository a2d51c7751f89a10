"""The Lock object: with-blocks, decorator, explicit calls; ownership by object, not by thread."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from turbolock import LockClient, LockNotAcquiredError, LockNotOwnedError, LockUsageError


def test_with_block_holds_and_releases(client: LockClient) -> None:
    with client.lock("w", 5) as lock:
        assert lock.owned()
        assert client.query("w").held
        assert 4 < lock.remaining() <= 5
        assert client.try_acquire("w", 5) is None
    assert not client.query("w").held
    assert lock.lease is None and lock.remaining() == 0.0 and not lock.owned()


def test_with_block_raises_when_not_acquired(client: LockClient) -> None:
    holder = client.try_acquire("taken", 30)
    assert holder is not None
    with pytest.raises(LockNotAcquiredError, match="taken"), client.lock("taken", 5, blocking=False):
        pytest.fail("the body must not run")
    with pytest.raises(LockNotAcquiredError, match=r"within 0\.1s"), client.lock("taken", 5, timeout=0.1):
        pytest.fail("the body must not run")
    assert client.release(holder)


def test_lost_lock_is_reported_at_exit(client: LockClient, raw: redis.Redis) -> None:
    with pytest.raises(LockNotOwnedError), client.lock("lost", 5):
        raw.set(client.key_prefix + b"lost", b"thief", px=5000)
    assert raw.get(client.key_prefix + b"lost") == b"thief"


def test_block_error_wins_over_lost_lock(client: LockClient, raw: redis.Redis) -> None:
    with pytest.raises(KeyError), client.lock("lost2", 5):
        raw.delete(client.key_prefix + b"lost2")
        raise KeyError("from the block")


def test_ownership_belongs_to_the_object_not_the_thread(client: LockClient) -> None:
    lock = client.lock("handoff", 5)
    assert lock.acquire()
    errors: list[BaseException] = []

    def release_elsewhere() -> None:
        try:
            lock.release()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=release_elsewhere)
    thread.start()
    thread.join()
    assert errors == []
    assert not client.query("handoff").held


def test_two_lock_objects_in_one_thread_exclude_each_other(client: LockClient) -> None:
    first = client.lock("same", 5)
    second = client.lock("same", 5)
    assert first.acquire(blocking=False)
    assert not second.acquire(blocking=False)
    first.release()
    assert second.acquire(blocking=False)
    with pytest.raises(LockUsageError):
        first.release()
    second.release()


def test_misuse_is_a_usage_error(client: LockClient) -> None:
    lock = client.lock("misuse", 5)
    with pytest.raises(LockUsageError):
        lock.release()
    with pytest.raises(LockUsageError):
        lock.extend()
    assert lock.acquire()
    with pytest.raises(LockUsageError):
        lock.acquire()
    lock.release()


def test_extend_and_lost_extend(client: LockClient, raw: redis.Redis) -> None:
    lock = client.lock("ext", 1)
    assert lock.acquire()
    lock.extend(20)
    assert 19 < lock.remaining() <= 20
    lock.extend()
    assert lock.remaining() <= 1
    raw.delete(client.key_prefix + b"ext")
    with pytest.raises(LockNotOwnedError):
        lock.extend()
    assert lock.lease is not None and lock.lease.is_lost and lock.valid_for() == 0.0
    with pytest.raises(LockNotOwnedError):  # the loss again, not a misuse
        lock.release()


def test_locked_reports_any_holder(client: LockClient) -> None:
    lock = client.lock("anyone", 5)
    assert not lock.locked()
    holder = client.try_acquire("anyone", 5)
    assert holder is not None
    assert lock.locked() and not lock.owned()


def test_decorator_serialises_calls_across_threads(client: LockClient) -> None:
    state = {"inside": 0, "max_inside": 0, "calls": 0}

    @client.lock("decorated", 5, timeout=10)
    def critical(amount: int) -> int:
        state["inside"] += 1
        state["max_inside"] = max(state["max_inside"], state["inside"])
        time.sleep(0.002)
        state["calls"] += amount
        state["inside"] -= 1
        return amount

    threads = [threading.Thread(target=lambda: [critical(1) for _ in range(10)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert state["calls"] == 40
    assert state["max_inside"] == 1
    assert critical.__name__ == "critical"
    assert not client.query("decorated").held


def test_repr_shows_no_token(client: LockClient) -> None:
    token = b"SECRET-TOKEN-0123456789"
    lock = client.lock("r", 5, token=token)
    assert lock.acquire()
    assert lock.lease is not None
    for text in (repr(lock), repr(lock.lease), repr(client), str(lock.lease)):
        assert "SECRET" not in text and token.hex() not in text
    lock.release()
