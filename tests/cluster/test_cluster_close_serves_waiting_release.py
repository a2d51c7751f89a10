"""A Redis Cluster client's close() serves a release still waiting for a connection to its
master (every connection busy) before it closes that master's connections, as one server's
does (tests/test_close_serves_calls_in_flight.py): the lock is free at once, not left to its ttl."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from _closing import CloseBesideRelease, close_beside_release
from _eventually import eventually
from _in_thread import InThread
from turbolock import ClientClosedError
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import names_on

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
    import asyncio

    from turbolock.asyncio import AsyncClusterLockClient

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
