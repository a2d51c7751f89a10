"""Untested before review: the Redlock EXTEND script answering 1 (held) instead of 2 (set again)
for a key that was gone. Only the bulk extend (RENEW_MANY) is tested with a key deleted on a
majority; a single extend of such a lock must fail too, not bring the lock back."""

from __future__ import annotations

from collections.abc import Callable

from redlock._helpers import TTL, values, wait_for
from turbolock import RedlockClient
from turbolock.redis_server import RedisServer


def test_single_extend_does_not_bring_back_a_lock_deleted_on_a_majority(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient], raws: Callable[..., list],
        key_prefix: str) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("vanished", TTL)
    assert lease is not None
    connections = raws(three)
    for raw in connections[:2]:  # a majority lost it (restarts without persistence, or deleted)
        raw.delete(key_prefix + "vanished")
    assert client.extend(lease, TTL) is False, "an extend brought back a lock deleted on a majority"
    assert lease.is_lost and lease.valid_for() == 0
    # the keys it set again are released in the background (someone may have held the lock since)
    assert wait_for(lambda: values(connections, key_prefix + "vanished") == [None] * 3, 3.0)


def test_control_single_extend_sets_the_key_again_on_a_minority(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient], raws: Callable[..., list],
        key_prefix: str) -> None:
    client = make_redlock(three)
    lease = client.try_acquire("thinning", TTL)
    assert lease is not None
    connections = raws(three)
    connections[0].delete(key_prefix + "thinning")
    assert client.extend(lease, TTL) is True
    assert values(connections, key_prefix + "thinning") == [lease.token] * 3
    assert client.release(lease)


def test_renewal_does_not_bring_back_a_lock_deleted_on_a_majority(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient], raws: Callable[..., list],
        key_prefix: str) -> None:
    """Untested before review: the Redlock RENEW_MANY script answering 1 instead of 2 for a key
    it set again. The renewal tests give a majority's keys to a thief, never delete them."""
    client = make_redlock(three)
    lost: list[object] = []
    gone = client.try_acquire("gone", 0.5, auto_renew=True, on_lost=lost.append)
    thinning = client.try_acquire("thinning", 0.5, auto_renew=True, on_lost=lost.append)  # the control
    assert gone is not None and thinning is not None
    connections = raws(three)
    for raw in connections[:2]:
        raw.delete(key_prefix + "gone")
    connections[0].delete(key_prefix + "thinning")
    assert gone.lost.wait(1.0), "a renewal brought back a lock deleted on a majority"
    assert wait_for(lambda: lost == [gone], 1.0)
    # the key the renewal set again on a minority (and the third master's) are released in the background
    assert wait_for(lambda: values(connections, key_prefix + "gone") == [None] * 3, 3.0)
    assert not thinning.is_lost  # a majority still held it: renewed, and set again where it was gone
    assert wait_for(lambda: values(connections, key_prefix + "thinning") == [thinning.token] * 3, 1.0)
    assert client.release(thinning)


def test_a_renewal_that_finds_the_lock_lost_releases_what_it_set_again(
        three: list[RedisServer], make_redlock: Callable[..., RedlockClient], raws: Callable[..., list],
        key_prefix: str) -> None:
    """Untested before review: the renewal's LOST verdict without ``client._abandoned`` for the
    keys it set again or extended on a minority (``redlock_renewal``): they would hold the name
    for a whole ttl after the loss was signalled. A 3 s ttl tells them from expiry."""
    client = make_redlock(three)
    lease = client.try_acquire("gone-long", 3.0, auto_renew=True)
    assert lease is not None
    connections = raws(three)
    for raw in connections[:2]:
        raw.delete(key_prefix + "gone-long")
    assert lease.lost.wait(4.0)
    assert wait_for(lambda: values(connections, key_prefix + "gone-long") == [None] * 3, 1.0), \
        f"keys left after the loss: {values(connections, key_prefix + 'gone-long')}"
