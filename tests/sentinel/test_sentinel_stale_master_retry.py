"""A new connection to a master the Sentinels replaced (``open_master_flow``), threads front:

1. The retried connection, to the master the Sentinels name, is of the pool's new generation
   (the refusal before it dropped the pool), so it stays pooled: it was closed when the call put
   it back, and the next call opened another.
2. The retry waits for the Sentinels' answer (another thread, or the once-a-second watcher, may
   be asking them) no longer than its own deadline: a blocking acquire with a short wait
   overran it by up to a whole call timeout.

Both found in review."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

from ._helpers import sentinel_checks_off, value_on

T = 2.0


def _received(node: Any) -> int:
    raw = redis.Redis(host=node.host, port=node.port)
    try:
        return int(raw.info("stats")["total_connections_received"])
    finally:
        raw.close()


def test_the_retried_connection_to_the_new_master_stays_pooled(
        own_sentinel_group: Callable[..., RedisSentinel], core_name: str, key_prefix: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel_checks_off(monkeypatch)
    group = own_sentinel_group(replicas=1, sentinels=1, down_after=1000)
    client = SentinelLockClient(group.sentinel_urls, group.service, core=core_name, key_prefix=key_prefix,
                                timeout=T, connect_timeout=T / 2)
    try:
        old_port = group.master_port()
        assert client.query("warm-up").held is False
        group.node_at(old_port).kill()
        new_master = group.wait_failover(old_port)
        client._exec.pool.drop_all()  # the pool opens a new connection: to the believed (dead) master
        lease = client.try_acquire("after", 30)  # the retry goes to the new master
        assert lease is not None and value_on(new_master, key_prefix + "after") == lease.token
        pool = client._exec.pool
        idle = len(pool._idle)
        before = _received(new_master)
        for i in range(3):
            assert client.query(f"q{i}").held is False
        opened = _received(new_master) - before - 1  # the second INFO's own connection
        assert idle == 1 and opened == 0, (
            f"the retried connection was not kept: {idle} idle after the call, {opened} new "
            "connection(s) opened by the next calls")
    finally:
        client.close()


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
