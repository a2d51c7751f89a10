"""One Sentinel of three hung (SIGSTOPped: its port still accepts, it never answers) and listed
first: the others know the master, and every call finds it within its deadline. Each Sentinel
asked gets its share of the time left, and one that did not answer is asked last from then on.
(Each was given the call's whole deadline: the hung one took all of it, and the next call asked
it first again, so no call reached the master. Found in review.) The control: the hung one
listed last."""

from __future__ import annotations

import time

import pytest

from _blocking_async import FRONTS
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_fronts

TIMEOUT = 1.0


@pytest.mark.parametrize("hung", [0, 2], ids=["first-hung", "last-hung"])
@pytest.mark.parametrize("front", FRONTS)
def test_a_hung_sentinel_does_not_hide_the_master(
        sentinel_group: RedisSentinel, core_name: str, key_prefix: str, front: str, hung: int) -> None:
    fronts = sentinel_fronts(front, sentinel_group, core_name, key_prefix, timeout=TIMEOUT,
                             connect_timeout=TIMEOUT)
    sentinel_group.sentinels[hung].pause()
    try:
        client = fronts.make()
        for i in range(3):
            started = time.monotonic()
            assert client.query(f"hung-{i}").held is False
            assert time.monotonic() - started < TIMEOUT + 0.5
    finally:
        sentinel_group.sentinels[hung].resume()
        fronts.close()
