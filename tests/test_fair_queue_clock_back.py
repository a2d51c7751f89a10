"""Untested before review: the fair-lock script without its reset for
a server clock that went back (``now < seen`` in ``fair_scripts._QUEUE``). After the clock goes
back, every waiter's last-asked time is in the future: without the reset a dead waiter at the
head would hold the queue up for as long as the clock jumped back, not for ``PATIENCE_MS``. The
jump is put in by writing the queue's hash as a server whose clock went back one hour leaves it."""

from __future__ import annotations

import time

import redis

from turbolock import LockClient
from turbolock._wire.fair_scripts import PATIENCE_MS
from turbolock.redis_server import RedisServer

HOUR_MS = 3_600_000


def _server_ms(raw: redis.Redis) -> int:
    seconds, micros = raw.time()
    return seconds * 1000 + micros // 1000


def test_a_dead_head_is_passed_over_after_patience_when_the_clock_went_back(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis) -> None:
    base = b"{" + key_prefix.encode() + b"job}"
    future = _server_ms(raw) + HOUR_MS  # what the queue saw before the clock went back an hour
    dead = b"d" * 16  # a waiter that crashed in the queue, first in line
    raw.zadd(base + b":queue", {dead: 1})
    raw.hset(base + b":asked", mapping={dead: future, b":seen": future})
    raw.pexpire(base + b":queue", 30_000)
    raw.pexpire(base + b":asked", 30_000)
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        lock = client.lock("job", 10, fair=True)
        began = time.monotonic()
        got = lock.acquire(timeout=PATIENCE_MS / 1000 + 3)
        waited = time.monotonic() - began
        assert got, "a dead waiter with a last-asked time in the future held the queue past its patience"
        assert waited >= PATIENCE_MS / 1000 - 0.2  # it did wait for the dead one's patience
        lock.release()
