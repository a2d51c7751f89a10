"""Fixtures: a master with one replica watched by three Sentinels (Debian's redis-server, the
Sentinels run as ``redis-server --sentinel``), shared by the session, groups of a test's own for
failovers, and SentinelLockClients on both cores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient


@pytest.fixture(scope="session")
def sentinel_group() -> Iterator[RedisSentinel]:
    """Shared: tests keep apart by key prefix and leave the master where it was."""
    with RedisSentinel(replicas=1, sentinels=3) as made:
        yield made


@pytest.fixture
def own_sentinel_group() -> Iterator[Callable[..., RedisSentinel]]:
    """``own_sentinel_group(**options)``: a group for this test alone, to fail the master over."""
    started: list[RedisSentinel] = []

    def make(**options: Any) -> RedisSentinel:
        made = RedisSentinel(**options).start()
        started.append(made)
        return made

    yield make
    for made in started:
        made.stop()


@pytest.fixture
def make_sentinel_client(core_name: str, key_prefix: str) -> Iterator[Callable[..., SentinelLockClient]]:
    """``make_sentinel_client(group, **options)``: a SentinelLockClient on this test's core and prefix."""
    clients: list[SentinelLockClient] = []

    def make(group: RedisSentinel, **options: Any) -> SentinelLockClient:
        options.setdefault("core", core_name)
        options.setdefault("key_prefix", key_prefix)
        client = SentinelLockClient(group.sentinel_urls, group.service, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
