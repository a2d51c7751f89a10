"""A new connection to a master the Sentinels replaced (``open_master_flow``), threads front:
the retry waits for the Sentinels' answer (another thread, or the once-a-second watcher, may be
asking them) no longer than its own deadline. A blocking acquire with a short wait overran it by
up to a whole call timeout: found in review. (The retried connection keeps the generation its
get() counted, so it is closed when put back after the refusal dropped the pool: one more
connect after a failover, and the pool's count of connections stays right.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from turbolock.errors import UnsentTimeoutError
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

from ._helpers import sentinel_checks_off

T = 2.0


def _received(node: Any) -> int:
    raw = redis.Redis(host=node.host, port=node.port)
    try:
        return int(raw.info("stats")["total_connections_received"])
    finally:
        raw.close()


def test_the_retry_keeps_a_short_wait_while_the_watcher_asks(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str) -> None:
    group = own_sentinel_group(replicas=0, sentinels=1, down_after=60000)
    client = SentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                                timeout=T, connect_timeout=T / 2)
    sentinel = group.sentinels[0]
    try:
        assert client.query("warm-up").held is False  # believes the master; the watcher is started
        time.sleep(1.3)  # the watcher has asked once: its connection to the Sentinel is open
        pool = client._exec.pool
        master = group.node_at(group.master_port())
        sentinel.pause()
        try:
            limit = time.monotonic() + 5
            while not pool._asking.locked():  # the watcher is asking the paused Sentinel
                assert time.monotonic() < limit, "the watcher never asked"
                time.sleep(0.01)
            master.kill()  # the believed master refuses the connect: the retry asks the Sentinels
            pool.drop_all()
            wait = 0.3
            started = time.monotonic()
            try:
                got = client.lock("short", 30).acquire(timeout=wait)
            except Exception as exc:  # a failure is fine; its time is what is checked
                got = exc
            took = time.monotonic() - started
        finally:
            sentinel.resume()
        assert took < wait + 0.5, f"a {wait} s wait took {took:.2f} s ({got!r})"
    finally:
        client.close()


def test_a_retry_after_a_stale_master_keeps_the_pool_bound(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=1, down_after=1000)
    client = SentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                                timeout=T, connect_timeout=T / 2, max_connections=1)
    try:
        old_port = group.master_port()
        assert client.query("warm-up").held is False
        group.node_at(old_port).kill()
        group.wait_failover(old_port)
        pool = client._exec.pool
        pool.drop_all()  # the next connection goes to the believed (dead) master, then is retried
        assert client.try_acquire("after", 30) is not None
        in_use = pool._in_use
        # max_connections=1: with one connection out, a second get must wait and time out.
        first = pool.get(time.monotonic() + T)
        second = None
        try:
            try:
                second = pool.get(time.monotonic() + 0.3)
            except UnsentTimeoutError:
                second = None
        finally:
            pool.put(first)
            if second is not None:
                pool.put(second)
        assert in_use == 0 and second is None, (
            f"after the retried connect the pool counts {in_use} connections in use, and with "
            f"max_connections=1 a second connection was {'handed out' if second else 'refused'}")
    finally:
        client.close()
