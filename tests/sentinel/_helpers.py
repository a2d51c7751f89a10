"""What Sentinel tests share beyond their fixtures."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import Fronts
from turbolock._aio import sentinel as aio_sentinel
from turbolock._sync import sentinel as sync_sentinel
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.redis_server import RedisServer
from turbolock.sentinel import SentinelLockClient


def sentinel_fronts(front: str, group: RedisSentinel, core_name: str, key_prefix: str,
                    **options: Any) -> Fronts:
    """``Fronts`` of SentinelLockClients, or of their asyncio twins, watching ``group``."""
    return Fronts(front, partial(SentinelLockClient, group.sentinel_urls, group.service),
                  partial(AsyncSentinelLockClient, group.sentinel_urls, group.service), core=core_name,
                  key_prefix=key_prefix, **options)


def sentinel_checks_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """No client asks the Sentinels once a second on its own (it would narrow a window a test
    opens on purpose to about a second): a call's own guard is what the test sees."""
    monkeypatch.setattr(sync_sentinel, "CHECK_INTERVAL", 3600.0)
    monkeypatch.setattr(aio_sentinel, "CHECK_INTERVAL", 3600.0)


def value_on(node: RedisServer, key: str) -> bytes | None:
    """``key``'s value on ``node``, read on a connection of its own."""
    raw = redis.Redis(host=node.host, port=node.port)
    try:
        value: bytes | None = raw.get(key)
        return value
    finally:
        raw.close()
