"""A Lock object given its own ``token`` tries with it at every attempt of a blocking acquire
(and of every later acquire). An attempt whose request was lost on the way (the network dropped
it) leaves this client owing a release of the lock with that token; when a later attempt took
the lock with the same token, that background release deleted it, and the Lock believed it held
a lock another client then took: two holders (found by review). Each attempt now first makes
the release it owes itself (``owed_release_flow``), so the lock it then takes is never the one
released.
"""

from __future__ import annotations

import os
import time

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _in_thread import InThread
from _netfaults import FaultProxy
from turbolock import LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

T = 0.3


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("fenced", [False, True], ids=["plain", "fenced"])
def test_a_lost_attempt_does_not_release_the_lock_a_later_attempt_took(
        front: str, fenced: bool, redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    token = os.urandom(16)
    raw = redis.Redis(host=redis_server.host, port=redis_server.port)
    key = (key_prefix + "job").encode()
    with FaultProxy(redis_server.host, redis_server.port) as proxy:
        url = proxy.url
        fronts = Fronts(front, lambda **kw: LockClient.from_url(url, **kw),
                        lambda **kw: AsyncLockClient.from_url(url, **kw),
                        core=core_name, key_prefix=key_prefix, timeout=T, connect_timeout=T)
        other = LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix)
        try:
            client = fronts.make(wake_waiters=False)
            assert client.query("warm").held is False
            lock = client.lock("job", 20, token=token, timeout=5, fenced=fenced)
            proxy.drop(to_server=True, to_client=False)  # requests are lost on the way
            taking = InThread(lock.acquire)
            time.sleep(0.8)  # a few attempts were lost
            proxy.heal()
            got = taking.join(6)
            assert got is True, got
            assert raw.get(key) == token  # the lock is the Lock object's
            time.sleep(2.5)  # the background release of the lost attempts retries meanwhile
            still = raw.get(key)
            valid = lock.valid_for()
            intruder = other.try_acquire("job", 5)
            assert still == token and intruder is None, (
                f"the Lock believes it holds the lock for {valid:.1f}s more, but its key is "
                f"{still!r} and another client took it: {intruder!r}")
        finally:
            proxy.heal()
            fronts.close()
            other.close()
            raw.close()

