"""A passing error reply to SSUBSCRIBE (BUSY while a slow Lua script runs on the server) leaves
the client's later waiters woken as before, once the script has ended. It was taken for a
refusal for good: no waiter of that client was woken again, for the rest of its life (found in
review; the book's own rules: ``tests/test_wake_book.py``)."""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from _waking import PROMPT, acquire_in_thread, stop_polling
from turbolock import LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_server import RedisServer

BUSY_SCRIPT = "local t=redis.call('time')[1]+1 while redis.call('time')[1]+0 < t+1 do end return 1"


@pytest.mark.parametrize("front", FRONTS)
def test_a_busy_script_does_not_deafen_the_client(front: str, own_server: RedisServer, core_name: str,
                                                  key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stop_polling(monkeypatch)
    raw = redis.Redis(port=own_server.port)
    raw.config_set("busy-reply-threshold", 100)
    url = own_server.url
    fronts = Fronts(front, partial(LockClient.from_url, url), partial(AsyncLockClient.from_url, url),
                    core=core_name, key_prefix=key_prefix, timeout=5.0)
    try:
        client = fronts.make()
        holder = fronts.make()
        assert holder.try_acquire("k1", 30) is not None
        warm = holder.try_acquire("k0", 30)
        assert warm is not None
        assert not client.lock("k0", 30).acquire(timeout=0.3)  # the subscriber connection is up
        assert holder.release(warm)
        target = client._target if hasattr(client, "_target") else client
        join = target._wake_join
        busy_thread: list[threading.Thread] = []

        def busy_then_join(key: bytes, deadline: float) -> Any:
            if not busy_thread:  # a slow script (or a FUNCTION) runs on the server as the waiter subscribes
                busy = redis.Redis(port=own_server.port)
                thread = threading.Thread(target=lambda: busy.eval(BUSY_SCRIPT, 0), daemon=True)
                thread.start()
                busy_thread.append(thread)
                time.sleep(0.3)
            return join(key, deadline)

        target._wake_join = busy_then_join
        try:
            client.lock("k1", 30).acquire(timeout=0.5)
        except Exception:
            pass
        busy_thread[0].join(10)
        target._wake_join = join
        assert eventually(lambda: raw.ping(), 5)

        # The script is long over. A new waiter on another name: it should subscribe and be woken.
        held = holder.try_acquire("k2", 30)
        assert held is not None
        waiter, done = acquire_in_thread(client.lock("k2", 30), 5)
        time.sleep(0.5)
        channel = (key_prefix + "k2").encode()
        subscribed = raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1]
        released = time.monotonic()
        assert holder.release(held)
        waiter.join(10)
        refusal = target._waker().book.refusal
        delay = done[0] - released if done else None
        assert subscribed == 1 and delay is not None and delay < PROMPT, (
            f"k2's waiter subscribed: {subscribed}, took the lock {delay}s after the release; "
            f"the waker's refusal, from a script that ended long ago: {refusal!r}")
    finally:
        fronts.close()
        raw.close()
