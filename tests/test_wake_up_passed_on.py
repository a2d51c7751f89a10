"""A waiter woken just as its wait ends, with no time left to attempt, passes the wake-up on
when it leaves, as ``wake_book`` promises ("a woken waiter that leaves without trying passes its
wake-up on"): the release woke one waiter of the process, and that one left without trying, so
the next slept on with the lock free (until its next poll, or to the end of its wait with polling
off). The moment is made exact here: the first waiter's wait, once woken, returns only after its
deadline has passed. Found in review (plain and fair waiters)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from _waking import acquire_in_thread, stop_polling
from turbolock import LockClient
from turbolock.redis_server import RedisServer

FIRST_WAIT = 0.3


@pytest.mark.parametrize("fair", [False, True], ids=["plain", "fair"])
def test_a_wake_up_the_first_waiter_could_not_use_goes_to_the_next(
        redis_server: RedisServer, core_name: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch,
        fair: bool) -> None:
    stop_polling(monkeypatch)  # only a wake-up can hand the lock over
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client, \
            LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as holder:
        held = holder.lock("seat", 30, fair=fair)
        assert held.acquire()
        real_wait = client._wake_wait
        first_ends = [0.0]
        releasing = threading.Event()

        def late_wait(ticket: Any, seconds: float) -> bool:
            woken = real_wait(ticket, seconds)
            if woken and releasing.is_set() and threading.current_thread().name == "first":
                time.sleep(max(0.0, first_ends[0] - time.monotonic()) + 0.02)  # woken as it ends
            return woken

        monkeypatch.setattr(client, "_wake_wait", late_wait)
        first_ends[0] = time.monotonic() + FIRST_WAIT
        first_result: list[bool] = []
        first = threading.Thread(name="first", daemon=True, target=lambda: first_result.append(
            client.lock("seat", 30, fair=fair).acquire(timeout=FIRST_WAIT)))
        first.start()
        time.sleep(0.05)
        second, got = acquire_in_thread(client.lock("seat", 30, fair=fair), 5.0)
        time.sleep(0.1)
        releasing.set()
        released = time.monotonic()
        held.release()  # wakes one waiter of the process: the first, which never tries
        first.join(5)
        second.join(6)
        assert first_result == [False]
        assert got, "the second waiter was never woken: the first waiter kept the wake-up"
        assert got[0] - released < 1.0
