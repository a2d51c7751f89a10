"""A threaded RedlockClient's close() serves the release another thread has under way, as the
one-server client's does (tests/test_close_serves_calls_in_flight.py): a release waiting for a
master's connection (its pool busy) as the client closes still deletes the lock on that master.
close() closed the masters it opened with a deadline of "now", so that release was refused
(ClientClosedError on that master) and the lock stayed there for its ttl; the asyncio client
gave them a node timeout. Then its one try at the releases owed (masters that did not answer)
includes what the calls it served left owed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from _in_thread import InThread
from turbolock import QuorumError, RedlockClient
from turbolock._flows.redlock_rules import TRIED_AS_IT_CLOSES
from turbolock.redis_server import RedisServer

NODE_TIMEOUT = 2.0
SLACK = 0.5


def test_a_release_waiting_for_a_masters_connection_goes_out_before_close_closes(
        three: list[RedisServer], core_name: str, key_prefix: str) -> None:
    raws = [redis.Redis(port=server.port) for server in three]
    client = RedlockClient([server.url for server in three], core=core_name, key_prefix=key_prefix,
                           node_timeout=NODE_TIMEOUT)
    try:
        pool = client.masters[0]._pool
        pool.max_connections = 1  # (the masters' pool size cannot be given through URLs)
        lease = client.try_acquire("job", 30)
        assert lease is not None
        assert not client._links._idle, "a set was parked: master 0's one connection stays in it"
        busy = pool.get(time.monotonic() + NODE_TIMEOUT)  # master 0's only connection, taken by another call
        releaser = InThread(lambda: client.release(lease))
        assert eventually(lambda: pool._waiters == 1, 2.0), "the release never waited for master 0"
        started = time.monotonic()
        closer = InThread(client.close)
        time.sleep(0.3)
        assert closer.is_alive(), "close() did not wait for the release queued for master 0's connection"
        pool.put(busy)  # the other call is over
        closer.join(NODE_TIMEOUT + SLACK)
        released = releaser.join(NODE_TIMEOUT + SLACK)
        took = time.monotonic() - started
        assert not closer.is_alive() and not releaser.is_alive()
        assert released is True, released
        held = [raw.exists(key_prefix + "job") for raw in raws]
        assert held == [0, 0, 0], f"the lock was left to its ttl on masters {held}"
        assert took < NODE_TIMEOUT + SLACK, f"close() took {took:.2f}s"
    finally:
        client.close()
        for raw in raws:
            raw.close()


@pytest.mark.timing
@pytest.mark.parametrize("descheduled", [False, True], ids=["", "descheduled-after-give"])
def test_close_tries_once_more_what_a_served_release_left_owed(
        own_masters: Callable[[int], list[RedisServer]], core_name: str, key_prefix: str,
        descheduled: bool) -> None:
    """Two masters stopped for 1.4 s across a release in flight: close() waits for it (its node
    timeout ends it, owed on those two), then its one try at the owed releases reaches them once
    they run again, and the lock is gone from every master as close() returns. It tried before
    serving the calls, so a served release's debt was left to the ttl. ``descheduled``: the
    releasing thread pauses 50 ms once its connections are back, before it records its debt (a
    loaded host): close() counted the call over then, and missed the debt (found in review)."""
    servers = own_masters(3)
    raws = [redis.Redis(port=server.port) for server in servers]
    client = RedlockClient([server.url for server in servers], core=core_name, key_prefix=key_prefix,
                           node_timeout=1.0)
    try:
        lease = client.try_acquire("job", 30)
        assert lease is not None
        if descheduled:
            give = client._links.give

            def give_then_descheduled(conns: Any) -> None:
                give(conns)
                if threading.current_thread() is not threading.main_thread():
                    time.sleep(0.05)

            client._links.give = give_then_descheduled  # type: ignore[method-assign]
        for server in servers[:2]:
            server.pause()
        resume = threading.Timer(1.4, lambda: [server.resume() for server in servers[:2]])
        resume.start()
        releaser = InThread(lambda: client.release(lease))
        time.sleep(0.5)  # close() waits one node timeout from here: 0.5 s past the release's own end
        started = time.monotonic()
        client.close()
        took = time.monotonic() - started
        outcome = releaser.join(1.0)
        resume.join()
        held = [raw.exists(key_prefix + "job") for raw in raws]
        assert isinstance(outcome, QuorumError) and TRIED_AS_IT_CLOSES in str(outcome), outcome
        assert held == [0, 0, 0], f"close() made no further try: masters {held} hold the lock for its ttl"
        assert took < 2 * 1.0 + SLACK, f"close() took {took:.2f}s"
    finally:
        for server in servers[:2]:
            server.resume()
        client.close()
        for raw in raws:
            raw.close()
