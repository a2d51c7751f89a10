"""What a Lock object says about itself is true, on both front ends (found in review):

- a ``with`` block whose auto-renewed lock the renewer found lost, and that took the lock again
  (allowed: a lease found lost does not count as held), ended with LockUsageError ("released
  inside its with block", which nobody did) instead of the loss, LockNotOwnedError;
- ``repr`` said ``held=True`` of a lease found lost;
- after ``owned()`` or ``remaining()`` (``client.check``) heard from the server that the lock
  is someone else's, ``ensure_held()`` still passed and ``valid_for()`` still gave seconds
  (``extend()`` hearing the same marks the lease lost): code checking right before acting acted
  under another's lock;
- ``copy.copy`` of a held Lock gave a second object holding the same lease;
- the threaded decorator took a callable object whose ``__call__`` is ``async def``: each call
  took the lock, made a coroutine and released the lock before the body ran."""

from __future__ import annotations

import asyncio
import copy
import pickle
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _blocking_async import Blocking
from turbolock import InvalidArgumentTypeError, LockClient, LockLostError, LockNotOwnedError, LockUsageError
from turbolock.redis_server import RedisServer


def _target(lock: Any) -> Any:
    """The Lock object itself (an asyncio one sits behind ``Blocking``)."""
    return lock._target if isinstance(lock, Blocking) else lock


def _lose(lock: Any, raw: redis.Redis, key: str) -> None:
    """Delete the lock behind its holder's back, until its renewer reports the loss."""
    raw.delete(key)
    deadline = time.monotonic() + 5
    while _target(lock).lease._lost is None:
        assert time.monotonic() < deadline, "the renewer never reported the loss"
        time.sleep(0.02)


@pytest.mark.parametrize("again", ["acquire", "nested-with"])
def test_a_lock_lost_in_its_block_and_taken_again_ends_with_the_loss(
        make_client: Callable[..., Any], raw: redis.Redis, key_prefix: str, again: str) -> None:
    client = make_client()
    lock = client.lock("leader", 0.6, auto_renew=True)
    target = _target(lock)
    with pytest.raises(LockNotOwnedError, match="lost inside its with block"):
        if isinstance(lock, Blocking):  # the asyncio Lock's own async with, on its loop
            async def block() -> None:
                async with target:
                    await asyncio.to_thread(_lose, lock, raw, key_prefix + "leader")
                    if again == "acquire":
                        assert await target.acquire(timeout=0) is True
                    else:
                        async with target:
                            pass

            lock._runner.run(block())
        else:
            with lock:
                _lose(lock, raw, key_prefix + "leader")
                if again == "acquire":
                    assert lock.acquire(timeout=0) is True
                else:
                    with lock:
                        pass
    if again == "acquire":  # the lock acquire() took again is the object's, not the block's: still held
        assert target.lease is not None and lock.owned()
        lock.release()
    else:  # the inner block released what it took
        assert target.lease is None


def test_repr_of_a_lease_found_lost_is_not_held(make_client: Callable[..., Any], raw: redis.Redis,
                                                key_prefix: str) -> None:
    lock = make_client().lock("lost", 0.6, auto_renew=True)
    assert lock.acquire() is True
    assert "held=True" in repr(_target(lock))
    _lose(lock, raw, key_prefix + "lost")
    assert lock.valid_for() == 0.0
    assert "held=False" in repr(_target(lock)), repr(_target(lock))


@pytest.mark.parametrize("ask", ["owned", "remaining", "extend"])
def test_a_lock_the_server_says_is_anothers_is_not_held_any_more(
        make_client: Callable[..., Any], raw: redis.Redis, key_prefix: str, ask: str) -> None:
    """After extend() raised LockNotOwnedError too: its release (in a ``finally``, say) was then a
    LockUsageError ("not held by this Lock object"), a misuse nobody made, hiding the loss."""
    lock = make_client().lock("taken", 5)
    assert lock.acquire(timeout=0) is True
    raw.set(key_prefix + "taken", b"another-holder-token-0123", px=5000)  # expired and taken, say
    try:
        if ask == "extend":
            with pytest.raises(LockNotOwnedError):
                lock.extend()
        else:
            assert not getattr(lock, ask)()
        assert lock.valid_for() == 0.0, f"valid_for()={lock.valid_for():.3f} after {ask}() said not ours"
        with pytest.raises(LockLostError):
            lock.ensure_held()
        assert "held=False" in repr(_target(lock))
        with pytest.raises(LockNotOwnedError):  # as before: its release is refused, not a misuse
            lock.release()
    finally:
        raw.delete(key_prefix + "taken")


def test_a_lease_a_check_found_gone_is_lost(make_client: Callable[..., Any], raw: redis.Redis,
                                            key_prefix: str) -> None:
    client = make_client()
    lease = client.try_acquire("checked", 5)
    assert lease is not None and client.check(lease) is not None and not lease.is_lost
    raw.delete(key_prefix + "checked")
    assert client.check(lease) is None
    assert lease.is_lost and lease.valid_for() == 0.0
    released = client.try_acquire("released", 5)
    assert released is not None and client.release(released)
    assert client.check(released) is None and not released.is_lost  # released, not lost


def test_a_copy_of_a_held_lock_holds_nothing(make_client: Callable[..., Any]) -> None:
    lock = make_client().lock("copied", 5)
    assert lock.acquire() is True
    try:
        for duplicate in (copy.copy(_target(lock)), copy.deepcopy(_target(lock))):
            assert duplicate.lease is None and "held=False" in repr(duplicate), repr(duplicate)
            assert duplicate.client is _target(lock).client and duplicate.name == "copied"
        assert _target(lock).lease is not None
        with pytest.raises(LockUsageError, match="cannot be pickled"):  # was a bare TypeError
            pickle.dumps(_target(lock))
    finally:
        lock.release()


def test_the_threaded_decorator_refuses_an_object_whose_call_is_async(
        redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    class Job:
        async def __call__(self) -> None:
            pass

    class Plain:
        def __call__(self) -> str:
            return "ran"

    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        with pytest.raises(InvalidArgumentTypeError, match="func"):
            client.lock("job", 5)(Job())
        assert client.lock("job", 5)(Plain())() == "ran"  # a plain callable object still works
