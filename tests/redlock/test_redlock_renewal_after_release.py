"""Redlock: a renewal in flight when the program releases the lock. The renewal script sets the
key again where a master lost it (keeping restarted masters in step), so a renewal that reaches
a master after the release's delete there makes the released lock live on it for a whole ttl,
held by nobody: its waiters, on that master, wait out the ttl. Here a proxy holds the renewal
back on the third master while the release goes through on another connection. The key it set
again is released again once the renewal answers; the control, with that second release
taken out, shows the ghost. Found in review. Threads only (see
``test_redlock_lost_acquire_late_write``: this proxy's held-back write does not reach the server
behind the asyncio client's connection)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from _eventually import eventually
from _netfaults import FaultProxy
from turbolock import AutoRenew, RedlockClient
from turbolock.redis_server import RedisServer

HELD_BACK = 1.0
TTL = 20
RENEW_AFTER = 1.0


@pytest.fixture
def proxy(three: list[RedisServer]) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", three[2].port) as started:
        yield started


def _held_back(proxy: FaultProxy) -> bool:
    """Whether the proxy holds bytes back on their way to the server (the renewal's write)."""
    return any(pipe.later_server for pipe in list(proxy._pipes.values()))


def _released_while_renewing(three: list[RedisServer], proxy: FaultProxy, core_name: str,
                             key_prefix: str, release_again: bool = True
                             ) -> tuple[RedlockClient, redis.Redis]:
    client = RedlockClient([three[0].url, three[1].url, proxy.url], core=core_name, key_prefix=key_prefix,
                           node_timeout=HELD_BACK + 1.0)
    if not release_again:  # the control: nothing is released in the background
        client._abandoned = lambda *args: None  # type: ignore[method-assign]
    third = redis.Redis(port=three[2].port)
    lease = client.try_acquire("seat", TTL, auto_renew=AutoRenew(renew_before=TTL - RENEW_AFTER))
    assert lease is not None
    proxy.delay(HELD_BACK, to_client=False)
    try:
        assert eventually(lambda: lease._flight is not None and _held_back(proxy), RENEW_AFTER + 2), \
            "no renewal was held back"
    finally:
        proxy.heal()  # the renewal stays held back; the release's connection is not
    assert client.release(lease)
    assert not third.exists(key_prefix + "seat")  # deleted there too, before the renewal landed
    return client, third


def test_a_key_a_renewal_in_flight_set_again_after_the_release_is_released_again(
        three: list[RedisServer], proxy: FaultProxy, core_name: str, key_prefix: str) -> None:
    client, third = _released_while_renewing(three, proxy, core_name, key_prefix)
    try:
        time.sleep(HELD_BACK + 0.2)  # the held-back renewal has landed
        assert eventually(lambda: not third.exists(key_prefix + "seat"), 2.0), \
            "the key the renewal set again outlived the release"
    finally:
        client.close()
        third.close()


def test_without_the_second_release_the_renewal_leaves_a_ghost(
        three: list[RedisServer], proxy: FaultProxy, core_name: str, key_prefix: str) -> None:
    """The control: with no release after the renewal's answer, the third master keeps the key."""
    client, third = _released_while_renewing(three, proxy, core_name, key_prefix, release_again=False)
    try:
        assert eventually(lambda: bool(third.exists(key_prefix + "seat")), HELD_BACK + 2), \
            "the held-back renewal never set the key again"
        time.sleep(1.0)
        assert third.pttl(key_prefix + "seat") > (TTL - 5) * 1000
        third.delete(key_prefix + "seat")
    finally:
        client.close()
        third.close()
