"""Bulk Redlock calls (fenced acquire, claim, extend, release) with one of three masters
SIGSTOPped: each bounded, the quorum of the other two decides, and once the stopped master
answers again nothing is left held anywhere."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from _eventually import eventually
from _raw import Raws
from turbolock import InstanceSummary, RedlockClient
from turbolock.redis_server import RedisServer

from ._helpers import TTL

MakeRedlock = Callable[..., RedlockClient]
OwnMasters = Callable[[int], list[RedisServer]]


def _keys_on(raw: redis.Redis, prefix: str) -> set[bytes]:
    return set(raw.scan_iter(match=prefix + "*", count=1000))


@pytest.mark.parametrize("op", ["fenced", "claim", "all_or_nothing"])
def test_bulk_with_a_stopped_master(own_masters: OwnMasters, make_redlock: MakeRedlock, raws: Raws,
                                           key_prefix: str, op: str) -> None:
    servers = own_masters(3)
    client = make_redlock(servers, chunk_size=50)
    names = [f"job:{i}" for i in range(300)]
    warm = client.acquire_many(names[:10], TTL, fenced=True)
    assert client.release_many(warm.acquired) == [True] * 10
    servers[1].pause()
    try:
        started = time.monotonic()
        if op == "fenced":
            result = client.acquire_many(names, TTL, fenced=True)
        elif op == "claim":
            result = client.acquire_many(names, TTL, limit=120)
        else:
            blocker = client.acquire_many(names[-1:], TTL)  # on the two live masters
            assert blocker.all_acquired
            result = client.acquire_many(names, TTL, all_or_nothing=True)
            assert not result.acquired, "one name was held: none is taken"
            result = client.acquire_many(names[:-1], TTL, all_or_nothing=True)
        elapsed = time.monotonic() - started
        assert elapsed < TTL / 10 + 1.5, f"took {elapsed:.3f}s"
        acquired = result.acquired
        assert acquired
        assert {lease.instances for lease in acquired} == {InstanceSummary(2, 0, 1)}
        assert client.extend_many(acquired, TTL) == [True] * len(acquired)
        assert client.release_many(acquired) == [True] * len(acquired)
        if op == "all_or_nothing":
            assert client.release_many(blocker.acquired) == [True]
    finally:
        servers[1].resume()
    poke = client.acquire_many(["poke"], TTL)  # the stopped master's cleanups ride in front of this
    assert client.release_many(poke.acquired) == [True]
    # An acquire the stopped master ran after its cleanup (its connection's bytes read after the
    # cleanup's) is released again 0.5 s and 2 s after that cleanup was answered.
    opened = raws(servers)
    assert eventually(lambda: not any(_keys_on(raw, key_prefix) for raw in opened), 3.0), (
        {i: len(_keys_on(raw, key_prefix)) for i, raw in enumerate(opened)})
