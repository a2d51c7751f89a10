"""Worker body of the fencing scenario (each runs in its own process)."""

from __future__ import annotations

import random
import time

import redis

from _pauses import stop_self
from turbolock import FencedStore, LockClient, StaleFenceError

from ._workers import data_key

TTL = 0.15
PAUSE_EVERY = 6
"""About one critical section in this many pauses (SIGSTOP) between its read and its write."""


def account_writer(index: int, url: str, core: str, prefix: str, fenced: bool, rounds: int) -> dict[str, int]:
    """Until ``rounds`` increments were applied in all: take the lock, read the balance, now and
    then stop this process (a holder paused past its ttl: the test resumes it later), write the
    balance plus one. ``fenced``: read and write through a ``FencedStore`` with the lease's fence;
    else plainly (the control, where late writes overwrite newer ones)."""
    data = redis.Redis.from_url(url)
    store = FencedStore(data)
    account = data_key(prefix, "account")
    rng = random.Random(index)
    applied = refused = paused = 0
    with LockClient.from_url(url, core=core, key_prefix=prefix, timeout=1.0) as locks:
        while int(data.get(data_key(prefix, "applied")) or 0) < rounds:
            lease = locks.try_acquire("account", TTL, fenced=fenced)
            if lease is None:
                time.sleep(0.001)
                continue
            try:
                if fenced:
                    assert lease.fence is not None
                    value = int(store.read(account, lease.fence) or 0)
                else:
                    value = int(data.hget(account, "value") or 0)
            except StaleFenceError:
                refused += 1
                continue
            if rng.randrange(PAUSE_EVERY) == 0:
                paused += 1
                stop_self(data, data_key(prefix, "paused"))  # resumed by the test, well past the ttl
            if fenced:
                assert lease.fence is not None
                written = store.write(account, value + 1, lease.fence)
            else:
                written = bool(data.hset(account, "value", value + 1) is not None)
            if written:
                applied += 1
                data.incr(data_key(prefix, "applied"))
            else:
                refused += 1
            locks.release(lease)
    return {"applied": applied, "refused": refused, "paused": paused}
