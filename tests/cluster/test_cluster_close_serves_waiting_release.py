"""A Redis Cluster client's close() serves a release still waiting for a connection to its
master (every connection busy) before it closes that master's connections, as one server's
does (tests/test_close_serves_calls_in_flight.py): the lock is free at once, not left to its ttl.
So it does for a release in flight that the master answers with a redirect (the slot moved): the
release follows it to the slot's new master before close() closes the connections."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _closing import CloseBesideRelease, close_beside_release
from _eventually import eventually
from _forking import in_forked_child
from _in_thread import InThread
from _raw import NodeRaws
from turbolock import ClientClosedError
from turbolock._wire.slots import key_slot
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import move_slot, names_on, other_master

T = 2.0
SLACK = 0.5


def test_a_release_waiting_for_a_connection_goes_out_before_close_closes(
        cluster: RedisCluster, make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str) -> None:
    client = make_cluster_client(cluster, timeout=T, max_connections=1)
    lease = client.try_acquire("job", 30, auto_renew=True)
    assert lease is not None
    master = client._cluster.routes.master_of(b"job")  # the name: the routes add the prefix
    assert master is not None
    pool = client._cluster.node(master).pool
    # A master with no connection yet: its pool comes after this one's (a close() that closed the
    # pools one by one let it serve new calls while this one served its waiters).
    known = set(client._cluster._nodes)
    later = next(n.port for n in cluster.nodes[:cluster.masters] if (n.host, n.port) not in known)
    elsewhere = names_on(cluster, key_prefix, later, 1, "late")[0]
    assert client.query(elsewhere).held is False  # a connection to that master, idle
    busy = pool.get(time.monotonic() + T)  # the master's only connection, taken by "another call"
    releaser = InThread(lambda: client.release(lease))
    assert eventually(lambda: pool._waiters == 1, 2.0), f"the release never waited: {releaser.outcome}"
    closer = InThread(client.close)
    time.sleep(0.3)
    waited = closer.is_alive()
    try:  # a call made once close() began: refused on every master, while the release is served
        late: object = client.try_acquire(elsewhere, 30)
    except ClientClosedError as exc:
        late = exc
    pool.put(busy)  # the other call is over
    closer.join(T + SLACK)
    released = releaser.join(T + SLACK)
    assert waited, f"close() did not wait for the release queued for a connection: {released!r}"
    assert released is True, released
    assert isinstance(late, ClientClosedError), f"a call made as the client closed got {late!r}"
    raw = redis.RedisCluster.from_url(cluster.url)
    try:
        assert raw.exists(key_prefix + "job") == 0, "the lock was left to its ttl"
    finally:
        raw.close()


def test_an_asyncio_release_in_flight_is_answered_and_new_calls_refused_as_close_runs(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str) -> None:
    cluster = quiet_cluster

    async def scenario() -> CloseBesideRelease:
        client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                 timeout=T)
        lease = await client.try_acquire("job", 30, auto_renew=True)
        master = client._cluster.routes.master_of(b"job")
        known = set(client._cluster._nodes)
        later = next(n.port for n in cluster.nodes[:cluster.masters] if (n.host, n.port) not in known)
        elsewhere = names_on(cluster, key_prefix, later, 1, "late")[0]
        assert (await client.query(elsewhere)).held is False  # that master's pool comes after
        stopped = next(n for n in cluster.nodes if (n.host, n.port) == master)
        return await close_beside_release(client, lease, stopped, T + SLACK,
                                          lambda: client.try_acquire(elsewhere, 30))

    seen = asyncio.run(scenario())
    assert seen.waited, f"close() did not wait for the release in flight: {seen.released!r}"
    assert seen.released is True, repr(seen.released)
    assert isinstance(seen.late, ClientClosedError), f"a call made as the client closed got {seen.late!r}"


def moved_behind_the_clients_back(cluster: RedisCluster, raws: NodeRaws,
                                  key: bytes) -> tuple[RedisServer, RedisServer]:
    """``key``'s slot, with the key, moved to another master, every master told but no client:
    a release sent to the old master is answered MOVED. (old master, new master)"""
    source = cluster.master_of(key_slot(key))
    target = other_master(cluster, source)
    move_slot(cluster, raws, source, target, key_slot(key), [key])
    return source, target


@pytest.mark.parametrize("core_name", ["c"], indirect=True)  # routing and closing: no core's own
def test_a_release_redirected_as_the_client_closes_follows_the_slot_first(
        quiet_cluster: RedisCluster, raws: NodeRaws, core_name: str, key_prefix: str) -> None:
    cluster = quiet_cluster
    key = f"{key_prefix}moving".encode()
    client = ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=T)
    lease = client.try_acquire("moving", 30)
    assert lease is not None
    source, target = moved_behind_the_clients_back(cluster, raws, key)
    source.pause()  # the release is written to the old master; its MOVED waits
    try:
        releaser = InThread(lambda: client.release(lease))
        time.sleep(0.05)
        started = time.monotonic()
        closer = InThread(client.close)
        time.sleep(0.2)
        waited = client.closed and closer.is_alive()
    finally:
        source.resume()
    closer.join(T + SLACK)
    took = time.monotonic() - started
    released = releaser.join(T + SLACK)
    assert waited, f"close() did not wait for the release in flight: {released!r}"
    assert released is True, f"the release redirected as the client closed got {released!r}"
    assert raws(target).exists(key) == 0, "the lock was left to its ttl on the slot's new master"
    assert took < T + SLACK, took


def test_an_asyncio_release_redirected_as_the_client_closes_follows_the_slot_first(
        quiet_cluster: RedisCluster, raws: NodeRaws, core_name: str, key_prefix: str) -> None:
    cluster = quiet_cluster
    key = f"{key_prefix}moving".encode()

    async def scenario() -> CloseBesideRelease:
        client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                 timeout=T)
        lease = await client.try_acquire("moving", 30)
        assert lease is not None
        source, _ = moved_behind_the_clients_back(cluster, raws, key)
        return await close_beside_release(client, lease, source, T + SLACK)

    seen = asyncio.run(scenario())
    assert seen.waited, f"close() did not wait for the release in flight: {seen.released!r}"
    assert seen.released is True, f"the release redirected as the client closed got {seen.released!r}"
    assert raws(cluster.master_of(key_slot(key))).exists(key) == 0, "the lock was left to its ttl"


def _child_close_took(close: Callable[[], object]) -> str:
    """In a forked child: how long ``close()`` took there, or what it raised."""
    def child() -> str:
        started = time.monotonic()
        close()
        return f"{time.monotonic() - started:.3f}"

    return in_forked_child(child)


@pytest.mark.parametrize("core_name", ["c"], indirect=True)
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_forked_childs_close_does_not_wait_for_its_parents_calls(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str, front: str) -> None:
    # The parent's release waits for a stopped master as the child forks: the child inherits the
    # count of calls under way, none of which it will ever see end.
    cluster = quiet_cluster
    paused = cluster.master_of(key_slot(f"{key_prefix}parent".encode()))
    loop = asyncio.new_event_loop()  # the asyncio client's in the parent (the child runs its own)
    made = ClusterLockClient if front == "threads" else AsyncClusterLockClient
    client: Any = made.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=T)

    def parents(call: Any) -> Any:
        return call if front == "threads" else loop.run_until_complete(call)

    def close_in_child() -> object:
        return client.close() if front == "threads" else asyncio.run(client.close())

    lease = parents(client.try_acquire("parent", 30))
    assert lease is not None
    paused.pause()
    try:
        releaser = InThread(lambda: parents(client.release(lease)))
        time.sleep(0.1)
        took = _child_close_took(close_in_child)
    finally:
        paused.resume()
    released = releaser.join(T + SLACK)
    parents(client.close())
    loop.close()
    assert float(took) < T / 2, f"the child's close() took {took}s (its call timeout: {T}s)"
    assert released is True, f"the parent's release got {released!r}"
