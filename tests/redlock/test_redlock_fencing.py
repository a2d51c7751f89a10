"""Redlock fencing: ``fenced=True`` gives each grant one fence per master (from that master's
own counter, which every name shares), threads and asyncio, 3 and 5 masters. Grants on
different majorities: no single number orders them (the negative control shows the largest
fence going backwards), but a store that checks every master's fence refuses the stale holder
once its successor wrote."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from turbolock import FencedStore, InvalidArgumentError, InvalidArgumentTypeError
from turbolock._flows.redlock_result import FencedRedlockLease, RedlockLease
from turbolock._wire.scripts import fence_counter
from turbolock.asyncio import AsyncRedlockClient
from turbolock.redis_server import RedisServer
from turbolock.redlock import RedlockClient


@pytest.fixture(params=FRONTS)
def make_client(request: pytest.FixtureRequest, core_name: str,
                key_prefix: str) -> Iterator[Callable[..., Any]]:
    made: list[Fronts] = []

    def make(servers: list[RedisServer], **options: Any) -> Any:
        urls = [server.url for server in servers]
        fronts = Fronts(request.param, partial(RedlockClient, urls), partial(AsyncRedlockClient, urls),
                        core=core_name, key_prefix=key_prefix, **options)
        made.append(fronts)
        return fronts.make()

    yield make
    for fronts in made:
        fronts.close()


STARTED = 10**15
"""A counter value this client could have started (the clock in microseconds is above it): one
below is moved up by the clock on its next grant (``NEXT_FENCES``)."""


def test_every_master_counts_its_own_fences(make_client: Callable[..., Any],
                                            masters: list[RedisServer], key_prefix: str) -> None:
    client = make_client(masters, node_timeout=2.0)  # every master answers, however busy the host
    seen = []
    for _ in range(3):
        lease = client.try_acquire("ledger", 10, fenced=True)
        assert isinstance(lease, FencedRedlockLease)
        seen.append(lease.fences)
        assert client.release(lease)
    assert seen == [tuple(fence + i for fence in seen[0]) for i in range(3)]
    lock = client.lock("ledger", 10, fenced=True)
    assert lock.acquire(timeout=1)
    assert lock.fences == tuple(fence + 3 for fence in seen[0])
    lock.release()
    fenced = client.try_acquire("ledger", 10, fenced=True)
    assert fenced is not None and client.extend(fenced, 10)  # a fenced lease is a lease like any
    assert client.release_many([fenced]) == [True]
    plain = client.try_acquire("plain", 10)
    assert isinstance(plain, RedlockLease) and not isinstance(plain, FencedRedlockLease)
    counter = fence_counter(key_prefix.encode())
    for server, first in zip(masters, seen[0], strict=True):
        with redis.Redis(port=server.port) as raw:
            assert raw.get(counter) == b"%d" % (first + 4) and raw.pttl(counter) == -1
    with pytest.raises(InvalidArgumentTypeError, match="fenced"):
        client.try_acquire("ledger", 10, fenced="yes")


def test_a_stale_holder_on_another_majority_is_refused(make_client: Callable[[list[RedisServer]], Any],
                                                       own_masters: Callable[[int], list[RedisServer]],
                                                       redis_server: RedisServer, key_prefix: str) -> None:
    a, _, c = masters = own_masters(3)
    client = make_client(masters)
    counter = fence_counter(key_prefix.encode())
    for server, granted in ((a, 5), (masters[1], 1), (c, 1)):  # master A has granted more before
        with redis.Redis(port=server.port) as raw:
            raw.set(counter, STARTED + granted)
    c.pause()
    try:
        stale = client.try_acquire("account", 1.0, fenced=True)  # on A and B
    finally:
        c.resume()
    assert stale is not None and stale.fences == (STARTED + 6, STARTED + 2, None)
    time.sleep(1.1)  # the holder pauses past its ttl
    a.pause()
    try:
        successor = client.try_acquire("account", 10, fenced=True)  # on B and C
    finally:
        a.resume()
    assert successor is not None and successor.fences == (None, STARTED + 3, STARTED + 2)
    resource = redis.Redis(port=redis_server.port)
    store = FencedStore(resource)
    key = key_prefix + "resource"
    assert store.write(key, "successor", successor.fences)
    assert not store.write(key, "stale", stale.fences)  # B's fence went from 2 to 3
    assert resource.hget(key, "value") == b"successor"
    # The negative control: the largest fence of each grant as one number goes backwards (6,
    # then 3), and a store of single fences takes the stale write over the successor's.
    control = key_prefix + "control"
    assert store.write(control, "successor", max(f for f in successor.fences if f is not None))
    assert store.write(control, "stale", max(f for f in stale.fences if f is not None))
    assert resource.hget(control, "value") == b"stale"
    assert client.release(successor)
    resource.close()


def test_a_fenced_bulk_acquire_gives_every_lease_its_fences(make_client: Callable[[list[RedisServer]], Any],
                                                            masters: list[RedisServer]) -> None:
    client = make_client(masters)
    names = [f"bulk:{i}" for i in range(300)]
    first = client.acquire_many(names, 10, fenced=True)
    assert len(first.acquired) == 300
    assert all(isinstance(lease, FencedRedlockLease) for lease in first.acquired)
    starts = first.acquired[0].fences  # each master's fences, one per lock in input order
    assert [lease.fences for lease in first.acquired] == [tuple(f + i for f in starts) for i in range(300)]
    assert all(client.release_many(first.acquired))
    for server in masters:
        with redis.Redis(port=server.port) as raw:
            raw.script_flush()  # every master answers NOSCRIPT first: loaded and sent again
    second = client.acquire_many(names, 10, fenced=True)
    assert [lease.name for lease in second.acquired] == names
    assert [lease.fences for lease in second.acquired] == [tuple(f + 300 + i for f in starts)
                                                           for i in range(300)]
    held = client.acquire_many(names[:5], 10, fenced=True)  # held by the leases above: none granted
    assert held.acquired == [] and len(held.not_acquired) == 5
    assert all(client.release_many(second.acquired))


def test_a_fenced_claim_gives_each_lease_taken_its_fences(
        make_client: Callable[[list[RedisServer]], Any], masters: list[RedisServer], key_prefix: str) -> None:
    client = make_client(masters)
    names = [f"shard:{i}" for i in range(40)]
    held = client.acquire_many(names[:30], 10)  # plain locks: a claim can only take the last 10
    assert len(held.acquired) == 30
    claim = client.acquire_many(names, 10, fenced=True, limit=4)
    assert len(claim.acquired) == 4
    assert all(isinstance(lease, FencedRedlockLease) for lease in claim.acquired)
    assert {lease.name for lease in claim.acquired} <= set(names[30:])
    firsts = sorted(lease.fences[0] for lease in claim.acquired)
    assert firsts == list(range(firsts[0], firsts[0] + 4))  # one per lock taken: none for the held
    assert all(client.release_many(claim.acquired))
    again = client.acquire_many(names[30:], 10, fenced=True, limit=10)
    assert len(again.acquired) == 10
    assert sorted(lease.fences[0] for lease in again.acquired) == list(range(firsts[-1] + 1, firsts[-1] + 11))
    for i, server in enumerate(masters):  # each counter ends at its last grant: the held drew none
        with redis.Redis(port=server.port) as raw:
            last = max(lease.fences[i] for lease in again.acquired)
            assert raw.get(fence_counter(key_prefix.encode())) == b"%d" % last
    assert all(client.release_many(again.acquired + held.acquired))
    with pytest.raises(InvalidArgumentError) as bad:  # every name checked before anything is sent
        client.acquire_many(["fine", "a}b"], 10, fenced=True, limit=1)
    assert bad.value.argument == "names"
    with pytest.raises(InvalidArgumentTypeError) as flag:
        client.acquire_many(["fine"], 10, fenced="yes", limit=1)
    assert flag.value.argument == "fenced"
    for server in masters:
        with redis.Redis(port=server.port) as raw:
            assert raw.keys(f"*{key_prefix}fine*") == []
