"""A subscriber connection that went silent (a NAT or firewall dropped the idle pub/sub
connection without a reset; the pool's busy connections are fine) must not stop a new
waiter from polling: README "Polling stays as the safety net", "a vanished host does not
leave waiters unheard".

A waiter of a key not yet subscribed sends SSUBSCRIBE on the dead connection and then waits
for its confirmation until the call deadline or the end of its wait, making no attempt at all
meanwhile: a lock released 0.3 s into a 3 s wait is never taken (acquire returns False), though
nobody else wanted it (found in review). A new waiter now waits ``JOIN_PATIENCE`` (0.25 s) for
the confirmation, then polls. Only the subscriber goes through the proxy here, so only it is cut."""

from __future__ import annotations

import threading
import time

import pytest

from _blocking_async import FRONTS, Blocking, Fronts
from _netfaults import FaultProxy
from turbolock.asyncio import AsyncLockClient
from turbolock.client import LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing


@pytest.mark.parametrize("front", FRONTS)
def test_a_new_waiter_still_polls_while_the_subscriber_is_silent(front: str, redis_server: RedisServer,
                                                                 core_name: str, key_prefix: str) -> None:
    with FaultProxy(redis_server.host, redis_server.port) as proxy:
        direct = redis_server.url
        via_proxy = f"redis://{proxy.host}:{proxy.port}/0"
        fronts = Fronts.at(front, direct, core=core_name, key_prefix=key_prefix)
        listener = None
        try:
            client = fronts.make()
            other = fronts.make()
            if front == "threads":
                listener = LockClient.from_url(via_proxy, core=core_name, key_prefix=key_prefix)
            else:  # on the client's own loop
                listener = Blocking(lambda: AsyncLockClient.from_url(via_proxy, core=core_name,
                                                                     key_prefix=key_prefix), client._runner)
            target = client._target if hasattr(client, "_target") else client
            sub_target = listener._target if hasattr(listener, "_target") else listener
            # The client's subscriber connects through the proxy; its lock calls go direct.
            target._waker_instance = sub_target._waker()
            # Warm up: the subscriber is connected and has heard a release.
            warm = other.try_acquire("warm", 30)
            assert warm is not None
            assert not client.lock("warm", 30).acquire(timeout=0.3)
            assert target._waker_instance.connects == 1
            assert other.release(warm)

            proxy.blackhole()  # the idle subscriber connection silently dies
            held = other.try_acquire("k", 30)
            assert held is not None
            threading.Timer(0.3, lambda: other.release(held)).start()
            started = time.monotonic()
            got = client.lock("k", 30).acquire(timeout=3)
            elapsed = time.monotonic() - started
            # Free from 0.3 s on: one poll pause (at most 0.2 s) later at worst.
            assert got, f"a lock free from 0.3 s on was not acquired in a 3 s wait ({elapsed:.2f} s)"
            assert elapsed < 0.3 + 0.2 + 0.2, elapsed
        finally:
            proxy.heal()
            if listener is not None:
                listener.close()
            fronts.close()
