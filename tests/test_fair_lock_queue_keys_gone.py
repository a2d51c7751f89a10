"""A fair lock's queue keys are gone once nobody waits (the README), also when a try that is not
in the queue drops the last, dead, place (a waiter that stopped asking): the attempt wrote the
queue's ``:seen`` in its ``:asked`` hash first, and only cleaned up when a place was left, so the
hash stayed for 30 s with nobody waiting (found in review)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest
import redis

from _eventually import eventually
from turbolock import LockClient
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the script's rule: no core's own


def _wait_forever(url: str, core: str, prefix: str) -> None:
    with LockClient.from_url(url, core=core, key_prefix=prefix) as client:
        client.lock("job", 10, fair=True).acquire(timeout=60)


@pytest.mark.parametrize("still_held", [False, True], ids=["then-taken", "still-held"])
def test_a_dead_head_dropped_by_a_try_leaves_no_queue_keys(redis_server: RedisServer, core_name: str,
                                                           key_prefix: str, raw: redis.Redis,
                                                           still_held: bool) -> None:
    queue, asked = f"{{{key_prefix}job}}:queue", f"{{{key_prefix}job}}:asked"
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        holder = client.lock("job", 30, fair=True)
        assert holder.acquire()
        dead = multiprocessing.get_context("fork").Process(
            target=_wait_forever, args=(redis_server.url, core_name, key_prefix), daemon=True)
        dead.start()
        assert eventually(lambda: raw.zcard(queue) == 1, 10)
        os.kill(dead.pid, signal.SIGKILL)  # a waiter that dies in the queue
        dead.join(5)
        if not still_held:
            holder.release()
        taken = None
        end = time.monotonic() + 10
        while raw.exists(queue) and time.monotonic() < end:  # tries keep the queue's clock going
            lock = client.lock("job", 30, fair=True)
            if lock.acquire(blocking=False):
                taken = lock
            else:
                time.sleep(0.3)
        assert not raw.exists(queue), "the dead waiter's place was never dropped"
        assert (taken is None) is still_held
        (holder if still_held else taken).release()  # type: ignore[union-attr]
        # Nobody waits any more: the queue and its hash must be gone (a try that did not take
        # the lock too).
        leftovers = [k for k in (queue, asked) if raw.exists(k)]
        assert leftovers == [], f"left behind with nobody waiting: {leftovers} " \
                                f"{raw.hgetall(asked)} pttl={raw.pttl(asked)}"
