"""Worker bodies for the multi-process Redlock scenarios (each runs in its own process).

Every worker makes its own ``RedlockClient`` from the master URLs; shared data lives on the
first master under ``prefix + "data:"`` and is updated with GET then SET, so only the lock
keeps updates from being lost.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import redis

from turbolock import RedlockClient

SPIN_LIMIT = 30.0


def contender(index: int, urls: list[str], core: str, prefix: str, rounds: int, start: Any) -> dict[str, Any]:
    """Take the "shared" Redlock ``rounds`` times; inside, bump a counter with GET then SET."""
    client = RedlockClient(urls, core=core, key_prefix=prefix, retry_count=0)
    data = redis.Redis.from_url(urls[0])
    inside_key, counter_key = prefix + "data:inside", prefix + "data:counter"
    statuses: Counter[str] = Counter()
    intervals: list[tuple[float, float]] = []
    crowded = 0
    start.wait()
    deadline = time.monotonic() + SPIN_LIMIT
    try:
        while len(intervals) < rounds:
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {index}: {len(intervals)} of {rounds} rounds in {SPIN_LIMIT}s")
            result = client.acquire("shared", 2.0, blocking=False)
            statuses[result.status.value] += 1
            lease = result.lease
            if lease is None:
                time.sleep(random.uniform(0.0, 0.004))
                continue
            began = time.monotonic()
            if data.incr(inside_key) != 1:
                crowded += 1
            value = int(data.get(counter_key) or 0)
            time.sleep(0.001)
            data.set(counter_key, value + 1)
            data.decr(inside_key)
            ended = time.monotonic()
            lease.ensure_held()
            if not client.release(lease):
                raise AssertionError(f"worker {index}: the lock expired inside a round")
            intervals.append((began, ended))
    finally:
        client.close()
        data.close()
    return {"statuses": dict(statuses), "intervals": intervals, "crowded": crowded,
            "implementation": client.implementation}
