"""A bulk acquire on Redis Cluster whose replies from one master never come (SIGSTOP: its port
accepts, nothing answers): the locks sent there are "maybe held", an
``AcquireOutcomeUnknownError`` naming them with the other masters' leases in ``acquired``, and
released in the background once that master answers again. (The cluster executor hands every
reply at once; the lost ones were once taken for error replies: a ``ResponseError`` about an
"unexpected reply" that left them held.) Beside a master that cannot be reached at all, the
same: its locks count as maybe held too (they were once dropped with the lost ones, the call
raising that master's ConnectionError).

release_many and extend_many, with the stopped master alone or beside a killed one: an
``OutcomeUnknownError`` within the call's time, and the releases whose outcome was lost are
retried in the background."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from _blocking_async import FRONTS
from _eventually import eventually
from turbolock import AcquireOutcomeUnknownError, OutcomeUnknownError
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, names_on

T = 0.3
"""The client's call timeout: how long the acquire waits for the stopped master."""
TTL = 30


@pytest.mark.parametrize("front", FRONTS)
def test_lost_replies_of_one_master_are_maybe_held_and_released(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str) -> None:
    cluster = quiet_cluster  # a paused master stays the master; each test keeps to its own prefix
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=T, connect_timeout=T)
    try:
        client = fronts.make()
        stopped = cluster.nodes[0]
        on_stopped = names_on(cluster, key_prefix, stopped.port, 21, "s")
        elsewhere = names_on(cluster, key_prefix, stopped.port, 40, "h", elsewhere=True)
        assert client.try_acquire(on_stopped.pop(), TTL)  # a connection to it: the batch goes out
        stopped.pause()
        try:
            started = time.monotonic()
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.acquire_many(elsewhere + on_stopped, TTL)
            took = time.monotonic() - started
        finally:
            stopped.resume()
        error = caught.value
        assert took < 6 * T, f"acquire_many took {took:.2f}s with a call timeout of {T}s"
        assert sorted(error.names or []) == sorted(on_stopped)
        assert sorted(lease.name for lease in error.acquired) == sorted(elsewhere)
        assert error.not_sent == []
        raw = raws(stopped)
        keys = [(key_prefix + name).encode() for name in on_stopped]

        def left() -> int:
            return sum(raw.exists(key) for key in keys)

        assert eventually(lambda: left() == 0, 5.0), "the maybe-held locks were left held"
        assert client.release_many(error.acquired) == [True] * len(elsewhere)
    finally:
        fronts.close()


@pytest.mark.parametrize("front", FRONTS)
def test_lost_replies_beside_an_unreachable_master_are_maybe_held_and_released(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    fronts = cluster_fronts(front, cluster.urls[2], core_name, key_prefix, timeout=T, connect_timeout=T)
    try:
        client = fronts.make()
        stopped, killed = cluster.nodes[0], cluster.nodes[1]
        on_stopped = names_on(cluster, key_prefix, stopped.port, 21, "s")
        on_killed = names_on(cluster, key_prefix, killed.port, 5, "k")
        on_third = names_on(cluster, key_prefix, cluster.nodes[2].port, 5, "t")
        assert client.try_acquire(on_stopped.pop(), TTL)  # a connection to it: the batch goes out
        killed.kill()
        stopped.pause()
        try:
            started = time.monotonic()
            with pytest.raises(AcquireOutcomeUnknownError) as caught:
                client.acquire_many(on_stopped + on_killed + on_third, TTL)
            took = time.monotonic() - started
        finally:
            stopped.resume()
        error = caught.value
        assert took < 6 * T, f"acquire_many took {took:.2f}s with a call timeout of {T}s"
        assert sorted(error.names or []) == sorted(on_stopped + on_killed)
        assert sorted(lease.name for lease in error.acquired) == sorted(on_third)
        raw = raws(stopped)
        keys = [(key_prefix + name).encode() for name in on_stopped]

        def left() -> int:
            return sum(raw.exists(key) for key in keys)

        assert eventually(lambda: left() == 0, 5.0), "the maybe-held locks were left held"
    finally:
        fronts.close()


@pytest.mark.parametrize("kill_another", [False, True], ids=["alone", "beside-a-killed-master"])
@pytest.mark.parametrize("op", ["release_many", "extend_many"])
@pytest.mark.parametrize("front", FRONTS)
def test_release_and_extend_with_lost_replies_are_unconfirmed(
        own_cluster: Callable[..., RedisCluster], quiet_cluster: RedisCluster, core_name: str,
        key_prefix: str, raws: Callable[[RedisServer], redis.Redis], front: str, op: str,
        kill_another: bool) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000) if kill_another else quiet_cluster
    fronts = cluster_fronts(front, cluster.urls[2], core_name, key_prefix, timeout=T, connect_timeout=T)
    try:
        client = fronts.make()
        stopped, killed = cluster.nodes[0], cluster.nodes[1]
        on_stopped = names_on(cluster, key_prefix, stopped.port, 20, "s")
        on_killed = names_on(cluster, key_prefix, killed.port, 5, "k")
        leases = client.acquire_many(on_stopped + on_killed, TTL).acquired
        assert len(leases) == 25
        if kill_another:
            killed.kill()
        stopped.pause()
        started = time.monotonic()
        try:
            with pytest.raises(OutcomeUnknownError) as caught:
                if op == "release_many":
                    client.release_many(leases)
                else:
                    client.extend_many(leases, TTL)
            took = time.monotonic() - started
        finally:
            stopped.resume()
        assert took < 6 * T, f"{op} took {took:.2f}s"
        unconfirmed = on_stopped + (on_killed if kill_another else [])
        assert sorted(caught.value.names or []) == sorted(unconfirmed)
        if op == "release_many":
            raw = raws(stopped)
            keys = [(key_prefix + name).encode() for name in on_stopped]

            def left() -> int:
                return sum(raw.exists(key) for key in keys)

            assert eventually(lambda: left() == 0, 5.0), "releases whose outcome was lost were not retried"
    finally:
        fronts.close()
