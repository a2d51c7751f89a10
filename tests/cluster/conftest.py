"""Fixtures: a real Redis Cluster (3 masters, 1 replica each: Debian's redis-server with
``--cluster-enabled yes``, joined by ``redis-cli --cluster create``) for the session, clusters of
a test's own for failovers and slot migrations, and ClusterLockClients on both cores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _raw import NodeRaws
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer


@pytest.fixture(scope="session")
def cluster() -> Iterator[RedisCluster]:
    """Shared by the session's cluster tests; they keep apart by key prefix and leave every node
    running and every slot where it was."""
    with RedisCluster(masters=3, replicas=1) as made:
        yield made


@pytest.fixture(scope="module")
def quiet_cluster() -> Iterator[RedisCluster]:
    """The module's own cluster, no replicas and a long node timeout: a stopped (paused) master
    stays the master."""
    with RedisCluster(masters=3, replicas=0, node_timeout=60000) as made:
        yield made


@pytest.fixture
def own_cluster() -> Iterator[Callable[..., RedisCluster]]:
    """``own_cluster(**options)``: a cluster for this test alone, to kill nodes and move slots."""
    started: list[RedisCluster] = []

    def make(**options: Any) -> RedisCluster:
        made = RedisCluster(**options).start()
        started.append(made)
        return made

    yield make
    for made in started:
        made.stop()


@pytest.fixture
def make_cluster_client(core_name: str, key_prefix: str) -> Iterator[Callable[..., ClusterLockClient]]:
    """``make_cluster_client(cluster, **options)``: a ClusterLockClient on this test's core and prefix."""
    clients: list[ClusterLockClient] = []

    def make(target: RedisCluster, **options: Any) -> ClusterLockClient:
        options.setdefault("core", core_name)
        options.setdefault("key_prefix", key_prefix)
        client = ClusterLockClient.from_url(target.url, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture(params=FRONTS)
def make_client(request: pytest.FixtureRequest, cluster: RedisCluster, core_name: str,
                key_prefix: str) -> Iterator[Callable[..., Any]]:
    """``make_client(**options)``: a ClusterLockClient on the shared cluster, or its asyncio
    twin driven by ``Blocking`` (the test runs on both); a module may define its own."""
    fronts = Fronts(request.param, partial(ClusterLockClient.from_url, cluster.url),
                    partial(AsyncClusterLockClient.from_url, cluster.url), core=core_name,
                    key_prefix=key_prefix)
    yield fronts.make
    fronts.close()


@pytest.fixture
def cluster_client(cluster: RedisCluster,
                   make_cluster_client: Callable[..., ClusterLockClient]) -> ClusterLockClient:
    return make_cluster_client(cluster)


def node_raw(node: RedisServer) -> redis.Redis:
    return redis.Redis(host=node.host, port=node.port)


@pytest.fixture
def raws() -> Iterator[NodeRaws]:
    """``raws(node)``: redis-py on one node (no cluster redirects: what that node itself holds)."""
    opened: list[redis.Redis] = []

    def make(node: RedisServer) -> redis.Redis:
        connection = node_raw(node)
        opened.append(connection)
        return connection

    yield make
    for connection in opened:
        connection.close()
