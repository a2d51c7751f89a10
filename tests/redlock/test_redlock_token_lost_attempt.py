"""A RedlockLock given a ``token`` (tests/test_lock_token_lost_attempt.py for one server): an
attempt whose requests were lost leaves each master's client owing a release with the token;
while a master's cleaner has that release on its way, a later attempt with the same token took
the lock, and the release then deleted it: the Lock believed it held a lock another client took
(found by review). An attempt now waits until no such release is on its way (what is owed and
not yet sent goes out ahead of the attempt, on its connection)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import redis

from _in_thread import InThread
from _netfaults import FaultProxy
from turbolock import RedlockClient
from turbolock.redis_server import RedisServer


def test_a_lost_redlock_attempt_does_not_release_the_lock_a_later_attempt_took(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str) -> None:
    servers = own_masters(3)
    token = os.urandom(16)
    raws = [redis.Redis(host=s.host, port=s.port) for s in servers]
    key = (key_prefix + "job").encode()
    proxies = [FaultProxy(s.host, s.port).start() for s in servers]
    client = RedlockClient([p.url for p in proxies], core=core_name, key_prefix=key_prefix,
                           timeout=1.0, connect_timeout=1.0, node_timeout=0.1)
    other = RedlockClient([s.url for s in servers], core=core_name, key_prefix=key_prefix)
    try:
        assert client.query("warm") is not None
        lock = client.lock("job", 20, token=token, timeout=6)
        for proxy in proxies:
            proxy.drop(to_server=True, to_client=False)  # requests are lost on the way
        taking = InThread(lock.acquire)
        time.sleep(0.8)  # a few attempts were lost; the cleaners' releases are lost too
        for proxy in proxies:
            proxy.heal()
        got = taking.join(8)
        assert got is True, got
        assert [r.get(key) for r in raws] == [token] * 3
        time.sleep(3.0)  # the background releases of the lost attempts retry meanwhile
        still = [r.get(key) for r in raws]
        valid = lock.valid_for()
        intruder = other.try_acquire("job", 5)
        assert still == [token] * 3 and not intruder, (
            f"the RedlockLock believes it holds the lock for {valid:.1f}s more, but its keys are "
            f"{still!r} and another client took it: {intruder!r}")
    finally:
        for proxy in proxies:
            proxy.heal()
        client.close()
        other.close()
        for proxy in proxies:
            proxy.stop()
        for r in raws:
            r.close()
