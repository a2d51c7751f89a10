"""A Ctrl-C (KeyboardInterrupt) that lands while a threaded blocking acquire waits for its key's
subscription to be confirmed (``Waker.join``) leaves no waiter behind. The ticket was queued
before the wait and the flow never got it back to leave with, so it stayed in the wake book
for good (found in review): its subscription and subscriber connection were never let go,
later blocking acquires of that name waited behind the ghost first, and it took a release's
wake-up. The asyncio waker's join already left on any exception."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from turbolock import LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_an_interrupt_while_subscribing_leaves_no_ghost_waiter(own_server: RedisServer, core_name: str,
                                                               key_prefix: str, fair: bool) -> None:
    with LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix, timeout=3.0,
                             connect_timeout=3.0) as client, \
            LockClient.from_url(own_server.url, core=core_name, key_prefix=key_prefix) as holder:
        held = holder.try_acquire("ctrl-c", 30)
        assert held is not None
        join = client._wake_join
        in_join: list[float] = []

        def stop_then_join(key: bytes, deadline: float) -> Any:
            own_server.pause()  # the subscription's confirmation is late: join waits for it
            in_join.append(time.monotonic())
            # Inside the join's patience (JOIN_PATIENCE, 0.25 s): after it the flow polls instead.
            threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
            return join(key, deadline)

        client._wake_join = stop_then_join  # type: ignore[method-assign]
        # Python's own Ctrl-C: a test command started in the background of a shell without job
        # control (`bash .ci/run &`, as CI is) inherits SIGINT ignored, and Python then installs
        # no handler, so the SIGINT raised nothing (the clean-clone CI's timing run failed so).
        found = signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        outcome: object = None
        try:
            outcome = client.lock("ctrl-c", 30, fair=fair).acquire(timeout=10)
        except KeyboardInterrupt:
            outcome = KeyboardInterrupt
        finally:
            signal.signal(signal.SIGINT, found)
            own_server.resume()
        assert outcome is KeyboardInterrupt, f"no KeyboardInterrupt ({outcome!r}; SIGINT handler {found!r})"
        assert in_join and time.monotonic() - in_join[0] < 2.0, "the interrupt did not land in join"
        del client._wake_join
        time.sleep(1.5)
        waker = client._waker()
        assert not waker.waiting(), f"a ghost waiter is left: {waker.book.queues}"
