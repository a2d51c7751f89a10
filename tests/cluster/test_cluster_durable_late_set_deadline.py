"""An asyncio Redis Cluster client with ``replicas_ack``: a ``try_acquire`` whose ``SET`` is
answered late in its deadline must still end by that deadline (README, "Deadlines": a
single-lock call's budget is ``timeout``; "Durability": the ``WAIT`` goes in the same write as
the ``SET``). The asyncio executor sent ``WAIT`` only once the ``SET`` reply was in, as a new
request with a whole timeout of its own, so the call took the ``SET``'s time plus up to
``replicas_timeout``; a bulk call's ``WAIT`` had a timeout of its own past the call's budget
(found in review; the threaded executor kept both by the call's deadline)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

from cluster._helpers import names_on, replica_of
from turbolock import LockError
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.timing

T = 1.0
REPLICAS_TIMEOUT = 0.6
HELD_FOR = 0.8
"""How long the master holds the acquire's SET (``CLIENT PAUSE ... WRITE``) before running it."""
SLACK = 0.25


@pytest.fixture(scope="module")
def durable_cluster() -> Iterator[RedisCluster]:
    with RedisCluster(masters=3, replicas=1, node_timeout=60000) as made:
        yield made


def _slow_master_and_stopped_replica(cluster: RedisCluster, port: int) -> tuple[redis.Redis, object]:
    master = next(node for node in cluster.nodes if node.port == port)
    return redis.Redis(host=master.host, port=master.port), replica_of(cluster, master)


@pytest.mark.parametrize("call", ["try_acquire", "acquire_many"])
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_durable_acquire_answered_late_keeps_its_deadline(durable_cluster: RedisCluster, core_name: str,
                                                            key_prefix: str, front: str, call: str) -> None:
    master_node = durable_cluster.nodes[0]
    warm, name = names_on(durable_cluster, key_prefix, master_node.port, 2, f"durable-{front}-{call}")
    raw, replica = _slow_master_and_stopped_replica(durable_cluster, master_node.port)
    options = dict(core=core_name, key_prefix=key_prefix, timeout=T, connect_timeout=T, replicas_ack=1,
                   replicas_timeout=REPLICAS_TIMEOUT)

    def stall() -> None:
        raw.execute_command("CLIENT", "PAUSE", int(HELD_FOR * 1000), "WRITE")
        replica.pause()  # type: ignore[attr-defined]

    try:
        if front == "threads":
            with ClusterLockClient.from_url(durable_cluster.url, **options) as client:
                assert client.query(warm).held is False  # the map, a connection to the master
                stall()
                started = time.monotonic()
                try:
                    outcome: object = (client.try_acquire(name, 30) if call == "try_acquire"
                                       else client.acquire_many([name], 30))
                except LockError as exc:
                    outcome = exc
                took = time.monotonic() - started
        else:
            async def scenario() -> tuple[float, object]:
                client = AsyncClusterLockClient.from_url(durable_cluster.url, **options)
                try:
                    assert (await client.query(warm)).held is False
                    stall()
                    started = time.monotonic()
                    try:
                        got: object = await (client.try_acquire(name, 30) if call == "try_acquire"
                                             else client.acquire_many([name], 30))
                    except LockError as exc:
                        got = exc
                    return time.monotonic() - started, got
                finally:
                    await client.close()

            took, outcome = asyncio.run(scenario())
    finally:
        replica.resume()  # type: ignore[attr-defined]
        raw.execute_command("CLIENT", "UNPAUSE")
        raw.close()
    assert took <= T + SLACK, f"{front}: {call} took {took:.2f}s with a {T}s timeout ({outcome!r})"
