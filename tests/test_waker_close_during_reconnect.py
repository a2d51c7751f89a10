"""close() while the threaded subscriber pauses between reconnects (its server down) ends that
pause: close returns at once and the thread with it. It slept through close's deadline (up to
1 s) and outlived close (found in review; the asyncio subscriber's pause was already a cancelled
sleep)."""

from __future__ import annotations

import threading
import time

import pytest

from _in_thread import InThread
from turbolock import LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing  # close's 0.2 s against the pause's 1 s


def test_close_ends_the_subscriber_s_pause_between_reconnects(
        own_server: RedisServer, core_name: str, key_prefix: str) -> None:
    client = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=0.5)
    holder = LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix)
    assert holder.try_acquire("down", 60) is not None
    waiter = InThread(lambda: client.lock("down", 60).acquire(timeout=30))
    time.sleep(0.5)  # subscribed, waiting
    own_server.kill()
    waker = client._waker_instance
    assert waker is not None
    deadline = time.monotonic() + 10
    while waker.failures < 5:  # the reconnect pauses have grown to 1 s
        assert time.monotonic() < deadline
        time.sleep(0.01)
    failures = waker.failures
    while waker.failures == failures:  # just failed again: its 1 s pause starts
        assert time.monotonic() < deadline
        time.sleep(0.005)
    started = time.monotonic()
    client.close()
    took = time.monotonic() - started
    alive = [t.name for t in threading.enumerate() if t.name == "turbolock-waker"]
    waiter.join(5)
    holder.close()
    assert not alive and took < 0.2, f"close took {took:.3f}s; threads left after close: {alive}"
