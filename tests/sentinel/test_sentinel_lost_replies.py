"""A Sentinel client's bulk acquire whose replies never come (the master SIGSTOPped, its port
accepting): every lock sent is "maybe held", an ``AcquireOutcomeUnknownError`` naming them, and
released in the background once the master answers again. (The Sentinel executor hands every
reply at once; the lost ones were once taken for error replies: a ``ResponseError`` about an
"unexpected reply" that left them held.)"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from _eventually import eventually
from turbolock import AcquireOutcomeUnknownError
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_fronts

T = 0.3
"""The client's call timeout: how long the acquire waits for the stopped master."""
TTL = 30


@pytest.mark.parametrize("front", FRONTS)
def test_lost_replies_are_maybe_held_and_released(own_sentinel_group: Callable[..., RedisSentinel],
                                                  core_name: str, key_prefix: str, front: str) -> None:
    group = own_sentinel_group(replicas=0, sentinels=1, down_after=60000)  # no failover meanwhile
    fronts = sentinel_fronts(front, group, core_name, key_prefix, timeout=T, connect_timeout=T)
    master = group.node_at(group.master_port())
    raw = redis.Redis(host=master.host, port=master.port)
    try:
        client = fronts.make()
        assert client.query("warm-up").held is False  # a connection to the master: the batch goes out
        names = [f"s:{i}" for i in range(50)]
        master.pause()
        try:
            started = time.monotonic()
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.acquire_many(names, TTL)
            took = time.monotonic() - started
        finally:
            master.resume()
        error = caught.value
        assert took < 6 * T, f"acquire_many took {took:.2f}s with a call timeout of {T}s"
        assert sorted(error.names or []) == sorted(names)
        assert error.acquired == [] and error.not_sent == []
        keys = [(key_prefix + name).encode() for name in names]
        assert eventually(lambda: raw.exists(*keys) == 0, 5.0), "the maybe-held locks were left held"
    finally:
        fronts.close()
        raw.close()
