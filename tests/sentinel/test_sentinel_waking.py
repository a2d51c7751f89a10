"""Waking on release through Sentinel: the subscriber connects where the client's pool does
(the master the Sentinels name), on threads and asyncio."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from _blocking_async import FRONTS, Fronts
from _waking import PROMPT, handover_delays, stop_polling
from turbolock.asyncio import AsyncSentinelLockClient
from turbolock.redis_sentinel import RedisSentinel
from turbolock.sentinel import SentinelLockClient

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own


@pytest.fixture(params=FRONTS)
def client(request: pytest.FixtureRequest, sentinel_group: RedisSentinel, core_name: str,
           key_prefix: str) -> Iterator[Any]:
    group = sentinel_group
    fronts = Fronts(request.param, partial(SentinelLockClient, group.sentinel_urls, group.service),
                    partial(AsyncSentinelLockClient, group.sentinel_urls, group.service),
                    core=core_name, key_prefix=key_prefix)
    yield fronts.make()
    fronts.close()


def test_a_release_wakes_the_waiter_at_once(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    stop_polling(monkeypatch)  # only a wake-up can hand the lock over in time
    delays = handover_delays(client, 3)
    assert max(delays) < PROMPT, delays
