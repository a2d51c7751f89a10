"""An asyncio Redis Cluster client with ``replicas_ack``: a ``try_acquire`` whose ``SET`` is
answered late in its deadline must still end by that deadline (README, "Deadlines": a
single-lock call's budget is ``timeout``; "Durability": the ``WAIT`` goes in the same write as
the ``SET``). The asyncio executor sent ``WAIT`` only once the ``SET`` reply was in, as a new
request with a whole timeout of its own, so the call took the ``SET``'s time plus up to
``replicas_timeout``; a bulk call's ``WAIT`` had a timeout of its own past the call's budget
(found in review; the threaded executor kept both by the call's deadline)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from _durable_late_set import DURABLE, SLACK, T, held_writes, time_acquire
from cluster._helpers import names_on, replica_of
from turbolock.asyncio import AsyncClusterLockClient
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.timing


@pytest.fixture(scope="module")
def durable_cluster() -> Iterator[RedisCluster]:
    with RedisCluster(masters=3, replicas=1, node_timeout=60000) as made:
        yield made


@pytest.mark.parametrize("call", ["try_acquire", "acquire_many"])
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_durable_acquire_answered_late_keeps_its_deadline(durable_cluster: RedisCluster, core_name: str,
                                                            key_prefix: str, front: str, call: str) -> None:
    master = durable_cluster.nodes[0]
    warm, name = names_on(durable_cluster, key_prefix, master.port, 2, f"durable-{front}-{call}")
    kind = ClusterLockClient if front == "threads" else AsyncClusterLockClient
    make = partial(kind.from_url, durable_cluster.url, core=core_name, key_prefix=key_prefix, **DURABLE)

    def acquire(client: Any) -> Any:
        return client.try_acquire(name, 30) if call == "try_acquire" else client.acquire_many([name], 30)

    with held_writes(master, replica_of(durable_cluster, master)) as stall:
        took, outcome = time_acquire(front, make, warm, stall, acquire)
    assert took <= T + SLACK, f"{front}: {call} took {took:.2f}s with a {T}s timeout ({outcome!r})"
