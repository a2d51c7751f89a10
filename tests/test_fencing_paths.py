"""Every fenced path on one server draws from the prefix's one counter, so a name's fences grow
(and never repeat) whichever path took it (single, bulk, claim, Lock object, fair Lock); a fair
fenced take whose reply was lost is followed by a fresh fence, higher than the lost one; a fenced
bulk acquire whose connection is killed while the server holds its transactions raises
AcquireOutcomeUnknownError and leaves nothing held once cleaned up. (Written in review.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from _eventually import eventually
from _fence_paths import fences_by_every_path
from turbolock import AcquireOutcomeUnknownError, LockClient
from turbolock._wire.fair_scripts import FAIR_ACQUIRE
from turbolock._wire.outcomes import Unconfirmed
from turbolock.errors import TimeoutError as TLTimeout
from turbolock.redis_server import RedisServer


def test_a_names_fences_grow_across_every_path(make_client: Callable[..., Any]) -> None:
    seen = fences_by_every_path(make_client(), "acct", bulk_with=["x", "y"])
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen


class _LosesOneFencedTake:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.lost: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def script_one(self, script: Any, key: bytes, token: bytes, ttl_ms: Any, deadline: Any = None) -> object:
        reply = self._inner.script_one(script, key, token, ttl_ms, deadline)
        if script in FAIR_ACQUIRE.values() and type(reply) is int and reply > 0 and not self.lost:
            self.lost.append(reply)
            raise Unconfirmed(TLTimeout("reply lost (injected)"))
        return reply


def test_a_fair_fenced_take_after_a_lost_reply_gets_a_fresh_fence(redis_server: RedisServer, key_prefix: str,
                                                                  core_name: str) -> None:
    with LockClient.from_url(redis_server.url, key_prefix=key_prefix, core=core_name) as c0, \
            LockClient.from_url(redis_server.url, key_prefix=key_prefix, core=core_name) as ca:
        lossy = _LosesOneFencedTake(ca._exec)
        ca._exec = lossy  # type: ignore[assignment]
        holder = c0.lock("fifo", 10, fair=True, fenced=True)
        assert holder.acquire()
        got: list[int] = []

        def wait() -> None:
            lock = ca.lock("fifo", 10, fair=True, fenced=True)
            assert lock.acquire(timeout=20)
            got.append(lock.fence)
            lock.release()

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.3)
        holder.release()
        waiter.join(20)
        assert lossy.lost and got, (lossy.lost, got)
        assert got[0] > lossy.lost[0]  # a fresh fence, not the lost take's again


def test_a_killed_connection_mid_transactions_leaves_no_lock(own_server: RedisServer, core_name: str) -> None:
    raw = redis.Redis(port=own_server.port)
    names = [f"k:{i}" for i in range(20_000)]
    with LockClient.from_url(own_server.url, key_prefix="p:", core=core_name, timeout=5.0) as client:
        assert client.query("warm-up").held is False
        raw.execute_command("CLIENT", "PAUSE", 400, "ALL")  # the transactions wait in the server

        def kill() -> None:
            time.sleep(0.2)
            raw.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")

        killer = threading.Thread(target=kill)
        killer.start()
        try:
            client.acquire_many(names, 30, fenced=True)
            outcome = "returned"
        except AcquireOutcomeUnknownError:
            outcome = "unknown"
        killer.join()
        assert outcome == "unknown"
        assert eventually(lambda: not any(raw.scan_iter(match="p:k:*", count=1000)), 5.0)
    raw.close()
