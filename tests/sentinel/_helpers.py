"""What Sentinel tests share beyond their fixtures."""

from __future__ import annotations

from functools import partial
from typing import Any

from _blocking_async import Fronts
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient


def sentinel_fronts(front: str, group: RedisSentinel, core_name: str, key_prefix: str,
                    **options: Any) -> Fronts:
    """``Fronts`` of SentinelLockClients, or of their asyncio twins, watching ``group``."""
    return Fronts(front, partial(SentinelLockClient, group.sentinel_urls, group.service),
                  partial(AsyncSentinelLockClient, group.sentinel_urls, group.service), core=core_name,
                  key_prefix=key_prefix, **options)
