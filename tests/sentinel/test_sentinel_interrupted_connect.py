"""A KeyboardInterrupt (Ctrl-C) that lands while a threaded Sentinel client opens a connection
to its master says nothing of the master: the master it learned stays known, as an asyncio
task's cancel leaves it. The threaded client took any exception, an interrupt too, for a failed
master: it forgot it and dropped every connection to it (noticed in review)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from types import FrameType

import pytest

from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def test_an_interrupt_during_the_masters_handshake_keeps_the_master(
        own_sentinel_group: Callable[..., RedisSentinel],
        make_sentinel_client: Callable[..., SentinelLockClient]) -> None:
    group = own_sentinel_group(replicas=0, sentinels=1, down_after=30_000)  # no failover while paused
    client = make_sentinel_client(group, timeout=5.0)
    routes = client._pool.routes
    previous = signal.signal(signal.SIGALRM, _interrupt)
    group.master.pause()  # the connect is accepted by the kernel; ROLE waits for an answer
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            client.query("x")
        assert time.monotonic() - started < 2.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        group.master.resume()
    assert routes.master == (group.master.host, group.master.port), "the interrupt forgot the master"
    assert client.query("x").held is False
