"""The slot map is read by one call at a time; a call that finds a read under way waits for it.
It waited for that read to end whatever its own deadline (found by review): a blocking acquire
whose wait was cut short, waiting behind a read with a whole call timeout on a cluster that
does not answer, ran that whole timeout. Now it waits no later than its own deadline and ends
with ``ClusterError``, on both fronts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from _in_thread import InThread
from turbolock import ClusterError, LockError
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.timing  # elapsed time against the call's deadline

LONG = 3.0  # the read under way: a whole call timeout
SHORT = 0.4  # the call waiting behind it
SLACK = 0.3


def _paused(cluster: RedisCluster) -> None:
    for node in cluster.nodes:
        node.pause()


def _resumed(cluster: RedisCluster) -> None:
    for node in cluster.nodes:
        node.resume()


def test_a_thread_waits_for_another_threads_map_read_no_later_than_its_deadline(
        own_cluster: Callable[..., RedisCluster],
        make_cluster_client: Callable[..., ClusterLockClient]) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster, timeout=LONG)
    assert client.query("warm-up").held is False
    nodes = client._cluster
    _paused(cluster)
    try:
        nodes.routes.stale = True
        # the read under way (it fails at its own deadline: not what is measured)
        reading = InThread(lambda: nodes.refresh(time.monotonic() + LONG))
        time.sleep(0.1)  # the read under way, holding the refresh
        started = time.monotonic()
        with pytest.raises(ClusterError, match="deadline"):
            nodes.refresh(started + SHORT)
        elapsed = time.monotonic() - started
    finally:
        _resumed(cluster)
    reading.join(LONG + 2)
    assert elapsed < SHORT + SLACK, f"waited {elapsed:.2f}s with a deadline of {SHORT}s"


def test_a_task_waits_for_another_tasks_map_read_no_later_than_its_deadline(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str) -> None:
    cluster = own_cluster(masters=3, replicas=0)

    async def scenario() -> float:
        client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                 timeout=LONG)
        try:
            assert (await client.query("warm-up")).held is False
            nodes = client._cluster
            _paused(cluster)
            try:
                nodes.routes.stale = True
                reading = asyncio.ensure_future(nodes.refresh(time.monotonic() + LONG))
                await asyncio.sleep(0.1)
                started = time.monotonic()
                with pytest.raises(ClusterError, match="deadline"):
                    await nodes.refresh(started + SHORT)
                elapsed = time.monotonic() - started
            finally:
                _resumed(cluster)
            await asyncio.gather(reading, return_exceptions=True)
            return elapsed
        finally:
            await client.close()

    elapsed = asyncio.run(scenario())
    assert elapsed < SHORT + SLACK, f"waited {elapsed:.2f}s with a deadline of {SHORT}s"


def test_a_new_asyncio_clients_own_read_ends_in_its_own_typed_error(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str) -> None:
    """The caller that starts the read waits for it with the same deadline: it raised the wait's
    bare TimeoutError, or "another call's read", instead of the read's own ClusterError (found
    by review)."""
    cluster = own_cluster(masters=3, replicas=0)

    async def scenario() -> list[BaseException]:
        errors: list[BaseException] = []
        for _ in range(3):
            client = AsyncClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix,
                                                     timeout=0.3)
            try:
                await client.try_acquire("fresh", 10)
            except BaseException as exc:  # what is raised is what is checked
                errors.append(exc)
            finally:
                await client.close()
        return errors

    _paused(cluster)
    try:
        errors = asyncio.run(scenario())
    finally:
        _resumed(cluster)
    assert len(errors) == 3
    assert all(isinstance(error, LockError) for error in errors), errors
    assert not any("still going on" in str(error) for error in errors), errors
