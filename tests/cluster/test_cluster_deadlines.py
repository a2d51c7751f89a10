"""Every ClusterLockClient call keeps its deadline when one master stops answering (SIGSTOP: its
port accepts, nothing replies), and locks on the other masters keep working meanwhile: a call
that timed out on the stopped master must not make the next calls spend their own deadline
asking it for the slot map.

The cluster's own failure detection is set far beyond the test (``cluster-node-timeout`` 60 s),
so no failover changes the picture while it runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _netfaults import Stopwatch
from turbolock import AcquireOutcomeUnknownError, ConnectionError, TimeoutError
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import names_on

pytestmark = pytest.mark.timing  # tight time budgets: scripts/test runs these on their own

T = 0.3
"""The client's call timeout (and connect timeout) here."""
TTL = 30


def test_calls_keep_their_deadline_when_a_master_stops_answering(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    client = make_cluster_client(cluster, timeout=T, connect_timeout=T)
    # The master asked first for the map (the lowest address) is the one that stops.
    stopped, healthy = sorted(cluster.nodes[:cluster.masters], key=lambda node: node.port)[:2]
    on_stopped = names_on(cluster, key_prefix, stopped.port, 6, "s")
    fresh, fresh_bulk = on_stopped.pop(), on_stopped.pop()
    on_healthy = names_on(cluster, key_prefix, healthy.port, 6, "h")
    held = {name: client.try_acquire(name, TTL) for name in on_stopped}  # warm: a connection to each
    assert all(held.values())
    watch = Stopwatch()
    stopped.pause()
    try:
        def fails(label: str, call: Callable[[], object], error: type[Exception] = ConnectionError) -> None:
            outcome = watch.run(label, T, call)
            watch.expect_raises(outcome, error)

        def works(label: str, call: Callable[[], object]) -> None:
            outcome = watch.run(label, T, call)
            watch.expect(outcome, outcome.error is None and bool(outcome.result), "succeeded")

        fails("try_acquire on the stopped master", lambda: client.try_acquire(fresh, TTL))
        works("try_acquire on a healthy master, right after", lambda: client.try_acquire(on_healthy[0], TTL))
        fails("release on the stopped master", lambda: client.release(held[on_stopped[0]]))
        works("query on a healthy master, right after", lambda: client.query(on_healthy[0]))
        fails("extend on the stopped master", lambda: client.extend(held[on_stopped[1]], TTL))
        fails("check on the stopped master", lambda: client.check(held[on_stopped[2]]))
        fails("query on the stopped master", lambda: client.query(on_stopped[3]))
        mixed = [*on_healthy[1:4], fresh_bulk]
        fails("acquire_many over every master", lambda: client.acquire_many(mixed, TTL))
        works("acquire_many on healthy masters only, right after",
              lambda: client.acquire_many(on_healthy[4:], TTL).acquired)
        # A read has nothing to clean up: the stopped master's timeout, though the others answered.
        fails("query_many over every master", lambda: client.query_many(on_healthy + on_stopped),
              TimeoutError)
    finally:
        stopped.resume()
    watch.check()


@pytest.mark.parametrize("all_or_nothing", [False, True], ids=["partial", "all-or-nothing"])
def test_a_bulk_acquire_that_fails_on_one_master(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, raws: Callable[[RedisServer], redis.Redis], all_or_nothing: bool) -> None:
    """The master last in line is killed: its locks are maybe held (AcquireOutcomeUnknownError),
    the other masters' leases come back in ``acquired`` (as a broken connection's on one server),
    or with ``all_or_nothing`` are released in the background."""
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    client = make_cluster_client(cluster, timeout=T, connect_timeout=T)
    names = [f"bulk:{i}" for i in range(300)]
    slots = raws(cluster.nodes[0]).execute_command("CLUSTER", "SLOTS")
    owner = {slot: int(master[1])
             for low, high, master, *_ in slots for slot in range(int(low), int(high) + 1)}
    first_seen: dict[int, int] = {}
    for i, name in enumerate(names):
        first_seen.setdefault(owner[key_slot((key_prefix + name).encode())], i)
    last = max(first_seen, key=lambda port: first_seen[port])  # its share goes out after the others
    on_last = {name for name in names if owner[key_slot((key_prefix + name).encode())] == last}
    assert client.query("warm").held is False  # the slot map is read
    next(node for node in cluster.nodes if node.port == last).kill()
    with pytest.raises(AcquireOutcomeUnknownError) as caught:
        client.acquire_many(names, TTL, all_or_nothing=all_or_nothing)
    error = caught.value
    assert set(error.names or []) == on_last
    healthy = [raws(node) for node in cluster.nodes[:cluster.masters] if node.port != last]
    if not all_or_nothing:
        assert sorted(lease.name for lease in error.acquired) == sorted(set(names) - on_last)
        assert client.release_many(error.acquired) == [True] * len(error.acquired)
    assert error.acquired == [] or not all_or_nothing
    deadline = time.monotonic() + 3
    while any(list(raw.scan_iter(match=key_prefix + "bulk:*")) for raw in healthy):
        assert time.monotonic() < deadline, "locks taken on the healthy masters were left held"
        time.sleep(0.05)


def test_async_calls_keep_their_deadline_when_a_master_stops_answering(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str) -> None:
    import asyncio

    from turbolock.asyncio import AsyncClusterLockClient

    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    stopped, healthy = sorted(cluster.nodes[:cluster.masters], key=lambda node: node.port)[:2]
    on_stopped = names_on(cluster, key_prefix, stopped.port, 4, "s")
    on_healthy = names_on(cluster, key_prefix, healthy.port, 4, "h")
    watch = Stopwatch()

    async def body() -> None:
        async with AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                   timeout=T, connect_timeout=T) as client:
            held = [await client.try_acquire(name, TTL) for name in on_stopped[:2]]
            assert all(held)
            stopped.pause()
            try:
                async def fails(label: str, call: Callable[[], Any],
                                error: type[Exception] = ConnectionError) -> None:
                    watch.expect_raises(await watch.arun(label, T, call), error)

                async def works(label: str, call: Callable[[], Any]) -> None:
                    outcome = await watch.arun(label, T, call)
                    watch.expect(outcome, outcome.error is None and bool(outcome.result), "succeeded")

                await fails("try_acquire on the stopped master",
                            lambda: client.try_acquire(on_stopped[2], TTL))
                await works("try_acquire on a healthy master, right after",
                            lambda: client.try_acquire(on_healthy[0], TTL))
                await fails("release on the stopped master", lambda: client.release(held[0]))  # type: ignore[arg-type]
                await fails("query on the stopped master", lambda: client.query(on_stopped[3]))
                await fails("acquire_many over every master",
                            lambda: client.acquire_many([*on_healthy[1:3], on_stopped[3]], TTL))
                await fails("query_many over every master",
                            lambda: client.query_many([*on_healthy, on_stopped[3]]), TimeoutError)
                await works("query_many on healthy masters only, right after",
                            lambda: client.query_many(on_healthy))
            finally:
                stopped.resume()

    asyncio.run(body())
    watch.check()
