"""Worker bodies for the renewal scenarios (each runs in its own process)."""

from __future__ import annotations

import time

import redis

from turbolock import LockClient, LockLostError

from ._workers import data_key

TTL = 0.6
CALL_TIMEOUT = 0.15


def paused_holder(index: int, url: str, core: str, prefix: str) -> dict[str, object]:
    """Holds one auto-renewed lock and acts in a loop, checking ensure_held() before each act."""
    data = redis.Redis.from_url(url)
    with LockClient.from_url(url, core=core, key_prefix=prefix, timeout=CALL_TIMEOUT) as locks:
        lease = locks.try_acquire("job", TTL, auto_renew=True)
        assert lease is not None
        data.set(data_key(prefix, "ready"), 1)
        acts = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                lease.ensure_held()
            except LockLostError as exc:
                data.rpush(data_key(prefix, "detected"), str(exc))
                return {"acts": acts, "detected": True}
            data.rpush(data_key(prefix, "acts"), index)
            acts += 1
    return {"acts": acts, "detected": False}


def renewing_holder(index: int, url: str, core: str, prefix: str, count: int) -> None:
    """Takes ``count`` auto-renewed locks, says so, then keeps them until it is killed."""
    data = redis.Redis.from_url(url)
    locks = LockClient.from_url(url, core=core, key_prefix=prefix, timeout=CALL_TIMEOUT)
    result = locks.acquire_many([f"w{index}:{i}" for i in range(count)], TTL, auto_renew=True)
    assert len(result.acquired) == count
    data.incr(data_key(prefix, "ready"))
    time.sleep(60)
