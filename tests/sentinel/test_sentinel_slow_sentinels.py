"""Sentinels that answer slowly but answer (a slow link: a proxy holds each reply back 0.2 s,
so a new connection's first commands and the question take 0.4 s of a 1 s call) still name the
master: a Sentinel is cut off only after half of what is left of the call (the last one: all of
it), so one that hangs leaves the others time (``test_sentinel_hung_first``) and one that is
slow still has most of it. (A third each, as first written, cut every one off: found in review.)"""

from __future__ import annotations

from functools import partial

import pytest

from _blocking_async import FRONTS, Fronts
from _netfaults import FaultProxy
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

TIMEOUT = 1.0
SLOW = 0.2


@pytest.mark.parametrize("front", FRONTS)
def test_slow_but_healthy_sentinels_still_name_the_master(
        sentinel_group: RedisSentinel, core_name: str, key_prefix: str, front: str) -> None:
    proxies = [FaultProxy(node.host, node.port).start() for node in sentinel_group.sentinels]
    for proxy in proxies:
        proxy.delay(SLOW, to_server=False, to_client=True)
    urls = [f"redis://127.0.0.1:{proxy.port}" for proxy in proxies]
    fronts = Fronts(front, partial(SentinelLockClient, urls, sentinel_group.service),
                    partial(AsyncSentinelLockClient, urls, sentinel_group.service), core=core_name,
                    key_prefix=key_prefix, timeout=TIMEOUT, connect_timeout=TIMEOUT)
    try:
        assert fronts.make().query("slow-sentinels").held is False
    finally:
        fronts.close()
        for proxy in proxies:
            proxy.stop()
