"""Untested before review: a fair attempt that finds the lock already its waiter's (an earlier
attempt's reply was lost) stamping it with ``KEEPTTL`` instead of ``PX ttl`` (``_QUEUE`` in
``fair_scripts``). The client believes the attempt's ttl from its own send time; the key must
live that long, not keep what was left of the lost attempt's ttl. Run on the script itself."""

from __future__ import annotations

import pytest
import redis

from turbolock._wire.fair_scripts import FAIR_ACQUIRE, WAITER_BYTES


@pytest.mark.parametrize("queue", [True, False], ids=["wait", "try"])
def test_the_waiters_own_lock_taken_again_gets_the_new_ttl(raw: redis.Redis, key_prefix: str,
                                                           queue: bool) -> None:
    script = FAIR_ACQUIRE[queue, False]
    key = (key_prefix + "again").encode()
    base = b"{" + key + b"}"
    waiter = b"w" * WAITER_BYTES
    raw.set(key, waiter + b"lost", px=1000)  # the lost attempt's take, 1 s left
    reply = raw.eval(script.source, 3, key, base + b":queue", base + b":asked", waiter + b"next", 30_000)
    assert reply == b"OK"
    assert raw.get(key) == waiter + b"next"
    assert raw.pttl(key) > 29_000, f"taken again with {raw.pttl(key)} ms left, not the attempt's 30 s"
    # control: another waiter's lock is not taken
    other = b"o" * WAITER_BYTES
    assert raw.eval(script.source, 3, key, base + b":queue", base + b":asked", other + b"xxxx", 30_000) \
        in (None, -1)
    assert raw.get(key) == waiter + b"next"
    raw.delete(key, base + b":queue", base + b":asked")
