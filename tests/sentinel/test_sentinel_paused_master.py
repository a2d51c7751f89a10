"""Claims, fenced acquires and the other bulk calls on a Sentinel group whose master is
SIGSTOPped (a connection to it open): typed errors within the call's time, maybe-held locks
released in the background, no lease reported released or extended that was not."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from _eventually import eventually
from turbolock import AcquireOutcomeUnknownError, OutcomeUnknownError, TimeoutError
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_fronts

T = 0.3
TTL = 30


@pytest.mark.parametrize("op", ["claim", "fenced_many", "fenced_one", "release_many", "extend_many",
                                "query_many"])
@pytest.mark.parametrize("front", FRONTS)
def test_bulk_calls_on_a_stopped_master(own_sentinel_group: Callable[..., RedisSentinel], core_name: str,
                                        key_prefix: str, front: str, op: str) -> None:
    group = own_sentinel_group(replicas=0, sentinels=1, down_after=60000)
    fronts = sentinel_fronts(front, group, core_name, key_prefix, timeout=T, connect_timeout=T)
    master = group.node_at(group.master_port())
    raw = redis.Redis(host=master.host, port=master.port)
    try:
        client = fronts.make()
        names = [f"s:{i}" for i in range(50)]
        keys = [(key_prefix + name).encode() for name in names]
        held = []
        if op in ("release_many", "extend_many"):
            held = client.acquire_many(names, TTL).acquired
            assert len(held) == len(names)
        else:
            assert client.acquire_many(["w"], 1, fenced=True).acquired  # the script is loaded
        master.pause()
        started = time.monotonic()
        try:
            expected = {"release_many": OutcomeUnknownError, "extend_many": OutcomeUnknownError,
                        "query_many": TimeoutError}.get(op, AcquireOutcomeUnknownError)
            with pytest.raises(expected) as caught:
                if op == "claim":
                    client.acquire_many(names, TTL, limit=10)
                elif op == "fenced_many":
                    client.acquire_many(names, TTL, fenced=True)
                elif op == "fenced_one":
                    client.try_acquire(names[0], TTL, fenced=True)
                elif op == "release_many":
                    client.release_many(held)
                elif op == "extend_many":
                    client.extend_many(held, TTL)
                else:
                    client.query_many(names)
            took = time.monotonic() - started
        finally:
            master.resume()
        assert took < 6 * T, f"{op} took {took:.2f}s with a call timeout of {T}s"
        error = caught.value
        if op == "extend_many":
            assert client.release_many(held) == [True] * len(held)
        if op != "query_many":
            assert eventually(lambda: raw.exists(*keys) == 0, 5.0), (
                f"{raw.exists(*keys)} locks left held after {error!r}")
    finally:
        fronts.close()
        raw.close()
