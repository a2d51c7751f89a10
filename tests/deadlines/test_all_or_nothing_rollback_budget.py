"""``acquire_many(..., all_or_nothing=True)`` that finds a name held gives back what it took,
within the call's budget (README "Deadlines": a bulk call, ``timeout`` per chunk of
``chunk_size`` commands), an unanswered release left to the background, as Redlock's bulk path
does. The give-back (``bulk_flows._roll_back``) was a second bulk call with a whole new budget
of its own, so over a slow link (every reply 0.7 s late, ``timeout=1``) a one-chunk call took
about 1.4 s (found in review). Shown on Redis Cluster (every node behind a delaying proxy,
announced with ``cluster-announce-port``) and on one server behind a delaying proxy, both
fronts; the locks taken are released all the same, once the link heals."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _netfaults import FaultProxy
from turbolock import LockError
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.timing

T = 1.0
DELAY = 0.7
SLACK = 0.2
NAMES = [f"aon{i}" for i in range(8)]  # spread over the three masters


@pytest.fixture(scope="module")
def proxied_cluster() -> Iterator[tuple[RedisCluster, list[FaultProxy]]]:
    with RedisCluster(masters=3, replicas=0, node_timeout=60000) as cluster:
        proxies = [FaultProxy(node.host, node.port, lifetime=600).start() for node in cluster.nodes]
        try:
            for node, proxy in zip(cluster.nodes, proxies, strict=True):
                raw = redis.Redis(host=node.host, port=node.port)
                raw.config_set("cluster-announce-port", proxy.port)
                raw.close()
            wanted = {proxy.port for proxy in proxies}
            deadline = time.monotonic() + 20
            while True:
                seen = []
                for node in cluster.nodes:
                    raw = redis.Redis(host=node.host, port=node.port)
                    seen.append({int(entry[2][1]) for entry in raw.execute_command("CLUSTER", "SLOTS")})
                    raw.close()
                if all(ports == wanted for ports in seen):
                    break
                assert time.monotonic() < deadline, "the announced ports did not spread"
                time.sleep(0.2)
            yield cluster, proxies
        finally:
            for proxy in proxies:
                proxy.stop()


def _measure(fronts: Fronts, proxies: list[FaultProxy]) -> tuple[float, object]:
    other = fronts.make()
    held = other.try_acquire(NAMES[-1], 30)  # one name held by someone else: the call gives back
    assert held is not None
    client = fronts.make()
    client.release_many(client.acquire_many(["warm1", "warm2", "warm3", "warm4"], 30).acquired)  # warm
    for proxy in proxies:
        proxy.delay(DELAY, to_server=False, to_client=True)
    started = time.monotonic()
    try:
        outcome: object = client.acquire_many(NAMES, 30, all_or_nothing=True)
    except LockError as exc:
        outcome = exc
    took = time.monotonic() - started
    for proxy in proxies:
        proxy.heal()
    assert not isinstance(outcome, LockError), outcome
    assert outcome.acquired == [] and outcome.not_acquired == [NAMES[-1]], outcome  # type: ignore[attr-defined]
    deadline = time.monotonic() + 5
    while any(info.held for info in other.query_many(NAMES[:-1])):  # given back, in the background
        assert time.monotonic() < deadline, "the locks the call took were never given back"
        time.sleep(0.05)
    return took, outcome


@pytest.mark.parametrize("front", FRONTS)
def test_cluster_all_or_nothing_give_back_within_the_budget(
        proxied_cluster: tuple[RedisCluster, list[FaultProxy]], core_name: str, key_prefix: str,
        front: str) -> None:
    _, proxies = proxied_cluster
    url = proxies[0].url
    fronts = Fronts(front, partial(ClusterLockClient.from_url, url),
                    partial(AsyncClusterLockClient.from_url, url),
                    core=core_name, key_prefix=key_prefix, timeout=T, connect_timeout=T)
    try:
        took, outcome = _measure(fronts, proxies)
        assert took <= T + SLACK, f"all_or_nothing acquire_many took {took:.2f}s, budget {T}s ({outcome!r})"
    finally:
        for proxy in proxies:
            proxy.heal()
        fronts.close()


@pytest.mark.parametrize("front", FRONTS)
def test_single_server_all_or_nothing_give_back_within_the_budget(
        redis_server: RedisServer, core_name: str, key_prefix: str, front: str) -> None:
    with FaultProxy(redis_server.host, redis_server.port) as proxy:
        fronts = Fronts.at(front, proxy.url, core=core_name, key_prefix=key_prefix, timeout=T,
                           connect_timeout=T)
        try:
            took, outcome = _measure(fronts, [proxy])
            assert took <= T + SLACK, \
                f"acquire_many(all_or_nothing=True) took {took:.2f}s, budget {T}s ({outcome!r})"
        finally:
            proxy.heal()
            fronts.close()
