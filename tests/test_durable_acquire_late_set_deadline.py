"""A durable acquire (``replicas_ack``) whose ``SET`` is answered late in its deadline (the master
held the write, ``CLIENT PAUSE ... WRITE``) and whose replica does not acknowledge: the call must
still end by its timeout, on both fronts (README "Durability": the ``WAIT`` goes in the same
write as the ``SET``). The asyncio client sent ``WAIT`` only once the ``SET`` reply was in, as a
request with a whole timeout of its own: the call took the ``SET``'s time plus
``replicas_timeout`` (found in review, on a Redis Cluster; the one-server client had the same).
Cluster: tests/cluster/test_cluster_durable_late_set_deadline.py. A one-chunk bulk acquire sent
its ``WAIT`` only after the chunk's replies, with a timeout of its own, on both fronts: it took
two timeouts where its budget is one a chunk; the ``WAIT`` now goes in the last chunk's write."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from _durable_late_set import DURABLE, SLACK, T, held_writes, time_acquire
from turbolock import LockClient
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_sentinel import RedisSentinel

pytestmark = pytest.mark.timing


@pytest.fixture(scope="module")
def replicated() -> Iterator[RedisSentinel]:
    with RedisSentinel(replicas=1, sentinels=0) as made:
        yield made


@pytest.mark.parametrize("call", ["try_acquire", "lock", "acquire_many"])
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_durable_acquire_answered_late_keeps_its_deadline(replicated: RedisSentinel, core_name: str,
                                                            key_prefix: str, front: str, call: str) -> None:
    kind = LockClient if front == "threads" else AsyncLockClient
    make = partial(kind.from_url, replicated.master.url, core=core_name, key_prefix=key_prefix, **DURABLE)

    def acquire(client: Any) -> Any:
        if call == "acquire_many":
            return client.acquire_many(["job", "other-job"], 30)
        return client.try_acquire("job", 30) if call == "try_acquire" else client.lock("job", 30).acquire(
            blocking=False)

    with held_writes(replicated.master, replicated.replicas[0]) as stall:
        took, outcome = time_acquire(front, make, "warm-up", stall, acquire)
    assert took <= T + SLACK, f"{front}: {call} took {took:.2f}s with a {T}s timeout ({outcome!r})"
    if call == "acquire_many":  # granted late, never acknowledged: given back, named as not durable
        assert sorted(outcome.not_durable) == ["job", "other-job"] and not outcome.acquired, outcome
