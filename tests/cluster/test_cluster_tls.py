"""Redis Cluster over TLS only (``port 0``, ``tls-port``, ``tls-cluster yes``,
``tls-replication yes``): the slot map names the nodes' TLS ports, every master is reached over
TLS with the CA checked, locks, bulk calls and renewal work on every master (threads and
asyncio), a bulk call follows ASK to the importing node, and a client that does not trust the
CA fails typed within its deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _pki import Pki
from turbolock import ConnectionError
from turbolock._wire.slots import key_slot
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import ClusterTls, RedisCluster

from ._helpers import asking_get, node_id

TTL = 30


@pytest.fixture(scope="module")
def tls_cluster(pki: Pki) -> Iterator[RedisCluster]:
    tls = ClusterTls(ca=str(pki.ca), cert=str(pki.server_cert), key=str(pki.server_key),
                     client_cert=str(pki.client_cert), client_key=str(pki.client_key))
    with RedisCluster(masters=3, replicas=1, tls=tls) as cluster:
        yield cluster


@pytest.fixture(params=FRONTS)
def make_client(request: pytest.FixtureRequest, tls_cluster: RedisCluster, core_name: str,
                key_prefix: str) -> Iterator[Callable[..., Any]]:
    fronts = Fronts(request.param, partial(ClusterLockClient.from_url, tls_cluster.url),
                    partial(AsyncClusterLockClient.from_url, tls_cluster.url),
                    core=core_name, key_prefix=key_prefix, timeout=2.0)
    yield fronts.make
    fronts.close()


def _on_masters(cluster: RedisCluster, pki: Pki, key_prefix: str) -> dict[int, int]:
    """How many of this test's keys each master holds, read over TLS by redis-py."""
    counts: dict[int, int] = {}
    for node in cluster.nodes:
        raw = redis.Redis(host=node.host, port=node.port, ssl=True, ssl_ca_certs=str(pki.ca))
        try:
            if raw.info("replication")["role"] == "master":
                counts[node.port] = len(list(raw.scan_iter(match=key_prefix + "*", count=1000)))
        finally:
            raw.close()
    return counts


def test_locks_bulk_and_renewal_on_every_master_over_tls(tls_cluster: RedisCluster, pki: Pki,
                                                         make_client: Callable[..., Any],
                                                         key_prefix: str) -> None:
    client = make_client(ssl_ca_certs=str(pki.ca))
    lease = client.try_acquire("single", TTL)
    assert lease is not None and client.try_acquire("single", TTL) is None
    names = [f"tls:{i}" for i in range(600)]
    result = client.acquire_many(names, TTL)
    assert result.all_acquired
    counts = _on_masters(tls_cluster, pki, key_prefix)
    assert len(counts) == 3 and all(count > 100 for count in counts.values()), counts
    assert sum(counts.values()) == 601
    renewed = client.try_acquire("renewed", 1.0, auto_renew=True)
    assert renewed is not None
    time.sleep(2.5)
    assert not renewed.is_lost and client.check(renewed) is not None
    assert client.release(renewed) and client.release(lease)
    assert client.release_many(result.acquired) == [True] * 600
    assert sum(_on_masters(tls_cluster, pki, key_prefix).values()) == 0


def test_a_client_that_does_not_trust_the_ca_fails_typed_in_time(tls_cluster: RedisCluster,
                                                                 make_client: Callable[..., Any]) -> None:
    client = make_client(timeout=0.5, connect_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=r"(?i)certificate"):
        client.try_acquire("single", TTL)
    assert time.monotonic() - started < 0.5 + 0.3


def test_bulk_calls_follow_ask_over_tls(make_client: Callable[..., Any], tls_cluster: RedisCluster, pki: Pki,
                                        key_prefix: str) -> None:
    """A bulk call without a deadline of its own sent an item answered ASK with an infinite one:
    a TLS socket's ``settimeout(inf)`` raised, and every bulk acquire touching a slot being
    migrated failed with ``AcquireOutcomeUnknownError`` (found in review)."""
    name = "{tlsmove}:a"
    slot = key_slot((key_prefix + name).encode())
    source = tls_cluster.master_of(slot)
    target = next(node for node in map(tls_cluster.master_of, (0, 8000, 16000)) if node.port != source.port)
    src = redis.Redis(host=source.host, port=source.port, ssl=True, ssl_ca_certs=str(pki.ca))
    dst = redis.Redis(host=target.host, port=target.port, ssl=True, ssl_ca_certs=str(pki.ca))
    client = make_client(ssl_ca_certs=str(pki.ca))
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(src))
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(dst))
    try:
        assert client.query("warm").held is False  # the map is read
        result = client.acquire_many([name], TTL)  # the key is not on the source: ASK to the target
        assert result.all_acquired, result
        assert asking_get(dst, (key_prefix + name).encode()) == result.acquired[0].token
        assert client.release_many(result.acquired) == [True]
    finally:
        for node in (src, dst):
            node.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
        src.close()
        dst.close()
