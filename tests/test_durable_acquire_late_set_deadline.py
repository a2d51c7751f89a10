"""A durable acquire (``replicas_ack``) whose ``SET`` is answered late in its deadline (the master
held the write, ``CLIENT PAUSE ... WRITE``) and whose replica does not acknowledge: the call must
still end by its timeout, on both fronts (README "Durability": the ``WAIT`` goes in the same
write as the ``SET``). The asyncio client sent ``WAIT`` only once the ``SET`` reply was in, as a
request with a whole timeout of its own: the call took the ``SET``'s time plus
``replicas_timeout`` (found in review, on a Redis Cluster; the one-server client had the same).
Cluster: tests/cluster/test_cluster_durable_late_set_deadline.py. (A bulk acquire's ``WAIT``
follows its last chunk with a timeout of its own, on both fronts, as each chunk gets one.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

from turbolock import LockClient, LockError
from turbolock.asyncio import AsyncLockClient
from turbolock.redis_sentinel import RedisSentinel

pytestmark = pytest.mark.timing

T = 1.0
REPLICAS_TIMEOUT = 0.6
HELD_FOR = 0.8
SLACK = 0.25


@pytest.fixture(scope="module")
def replicated() -> Iterator[RedisSentinel]:
    with RedisSentinel(replicas=1, sentinels=0) as made:
        yield made


@pytest.mark.parametrize("call", ["try_acquire", "lock"])
@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_durable_acquire_answered_late_keeps_its_deadline(replicated: RedisSentinel, core_name: str,
                                                            key_prefix: str, front: str, call: str) -> None:
    options = dict(core=core_name, key_prefix=key_prefix, timeout=T, connect_timeout=T, replicas_ack=1,
                   replicas_timeout=REPLICAS_TIMEOUT)
    raw = redis.Redis(host=replicated.master.host, port=replicated.master.port)
    replica = replicated.replicas[0]

    def stall() -> None:
        raw.execute_command("CLIENT", "PAUSE", int(HELD_FOR * 1000), "WRITE")
        replica.pause()

    try:
        if front == "threads":
            with LockClient.from_url(replicated.master.url, **options) as client:
                assert client.query("warm-up").held is False
                stall()
                started = time.monotonic()
                try:
                    outcome: object = (client.try_acquire("job", 30) if call == "try_acquire"
                                       else client.lock("job", 30).acquire(blocking=False))
                except LockError as exc:
                    outcome = exc
                took = time.monotonic() - started
        else:
            async def scenario() -> tuple[float, object]:
                async with AsyncLockClient.from_url(replicated.master.url, **options) as client:
                    assert (await client.query("warm-up")).held is False
                    stall()
                    started = time.monotonic()
                    try:
                        got: object = await (client.try_acquire("job", 30) if call == "try_acquire"
                                             else client.lock("job", 30).acquire(blocking=False))
                    except LockError as exc:
                        got = exc
                    return time.monotonic() - started, got

            took, outcome = asyncio.run(scenario())
    finally:
        replica.resume()
        raw.execute_command("CLIENT", "UNPAUSE")
        raw.delete(key_prefix + "job")
        raw.close()
    assert took <= T + SLACK, f"{front}: {call} took {took:.2f}s with a {T}s timeout ({outcome!r})"
