"""A Sentinel client's bulk acquire while a failover demotes the master part-way through the
batch: the first chunks take their locks, the rest are refused with READONLY and sent once more
to the master the Sentinels name next. Whatever that resend does, no lock taken by the first
send is left behind with nobody holding it:

- the resend fails (the Sentinels still name the demoted master): ``AcquireOutcomeUnknownError``
  with the first send's leases in ``acquired`` (counted as acquisitions by telemetry) and the
  refused names maybe held;
- the resend is interrupted (KeyboardInterrupt, a cancelled task): what the first send took is
  released in the background.

The master is demoted by the test itself (``REPLICAOF`` its own replica) as the batch goes out,
and promoted back when the client forgets it, so each case runs in a second."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from test_telemetry import Recorded, _instrumented
from turbolock import AcquireOutcomeUnknownError, ConnectionError
from turbolock._aio import sentinel as aio_sentinel
from turbolock._flows.bulk_plan import AcquirePlan
from turbolock._sync import sentinel as sync_sentinel
from turbolock.redis_sentinel import RedisSentinel

from ._helpers import sentinel_fronts

TTL = 30
NAMES = [f"batch:{i}" for i in range(6000)]
DEMOTED_AT = 3000
"""The first item of the chunk before which the master is demoted."""


class Demotion:
    """Demotes the master (``REPLICAOF`` its replica: writes refused with READONLY) as the
    batch's chunk starting at ``DEMOTED_AT`` is encoded, once; ``restore()`` promotes it back."""

    def __init__(self, group: RedisSentinel) -> None:
        self.master = group.node_at(group.master_port())
        self.replica = next(node for node in group.replicas)
        self.raw = redis.Redis(host=self.master.host, port=self.master.port)
        self.demoted = False

    def encode(self, original: Callable[..., None]) -> Callable[..., None]:
        def encode(plan: AcquirePlan, buf: Any, start: int, stop: int) -> None:
            if start == DEMOTED_AT and not self.demoted:
                self.demoted = True
                self.raw.execute_command("REPLICAOF", self.replica.host, self.replica.port)
            original(plan, buf, start, stop)
        return encode

    def restore(self) -> None:
        if self.demoted:
            self.raw.execute_command("REPLICAOF", "NO", "ONE")
            self.demoted = False

    def held(self, prefix: str) -> int:
        return sum(1 for _ in self.raw.scan_iter(match=prefix.encode() + b"batch:*", count=1000))


@pytest.fixture
def group(own_sentinel_group: Callable[..., RedisSentinel]) -> RedisSentinel:
    return own_sentinel_group(replicas=1, sentinels=1, down_after=60000)


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    yield from _instrumented()


@pytest.fixture
def demotion(group: RedisSentinel) -> Iterator[Demotion]:
    made = Demotion(group)
    yield made
    made.restore()
    made.raw.close()


def _fronts(front: str, group: RedisSentinel, core_name: str, key_prefix: str) -> Fronts:
    return sentinel_fronts(front, group, core_name, key_prefix, timeout=1.0, connect_timeout=1.0)


@pytest.mark.parametrize("front", FRONTS)
def test_a_failed_resend_gives_back_what_the_first_send_took(
        group: RedisSentinel, demotion: Demotion, core_name: str, key_prefix: str, front: str,
        recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    fronts = _fronts(front, group, core_name, key_prefix)
    try:
        client = fronts.make(chunk_size=1000)
        assert client.query("warm-up").held is False
        monkeypatch.setattr(AcquirePlan, "encode", demotion.encode(AcquirePlan.encode))
        with pytest.raises(AcquireOutcomeUnknownError) as caught:
            client.acquire_many(NAMES, TTL)
        monkeypatch.undo()
        error = caught.value
        taken = demotion.held(key_prefix)
        assert 0 < taken < len(NAMES), "the demotion must fall inside the batch"
        acquired = {lease.name for lease in error.acquired}
        assert len(acquired) == taken
        assert sorted(error.names or []) == sorted(set(NAMES) - acquired)  # refused, then maybe held
        assert recorded.total("turbolock.lock.acquisitions") == taken  # handed over: granted all the same
        demotion.restore()
        assert _released_after_restore(client, error.acquired) == [True] * taken
    finally:
        fronts.close()


def _released_after_restore(client: Any, leases: list[Any]) -> list[bool]:
    """``release_many`` once the master is promoted back. The background cleanup of the maybe-held
    locks may be opening a connection whose ROLE check ran while the master was still demoted
    (and asks the Sentinels again after it): a call that joins that connect fails with it, and
    the next one goes through."""
    deadline = time.monotonic() + 3
    while True:
        try:
            released: list[bool] = client.release_many(leases)
            return released
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize("front", FRONTS)
def test_an_interrupted_resend_releases_what_the_first_send_took(
        group: RedisSentinel, demotion: Demotion, core_name: str, key_prefix: str, front: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    fronts = _fronts(front, group, core_name, key_prefix)
    interrupt: type[BaseException] = KeyboardInterrupt if front == "threads" else asyncio.CancelledError
    seen: tuple[type[BaseException], ...] = (interrupt, concurrent.futures.CancelledError)  # through Blocking
    pool = sync_sentinel.SentinelPool if front == "threads" else aio_sentinel.SentinelPool

    def resend_interrupted(plan: AcquirePlan, buf: Any, indices: Any) -> None:
        raise interrupt

    master_failed = pool.master_failed

    def promoted_back(self: Any) -> None:  # the resend finds the master again, then is interrupted
        demotion.restore()
        master_failed(self)

    try:
        client = fronts.make(chunk_size=1000)
        assert client.query("warm-up").held is False
        monkeypatch.setattr(AcquirePlan, "encode", demotion.encode(AcquirePlan.encode))
        monkeypatch.setattr(AcquirePlan, "encode_indices", resend_interrupted)
        monkeypatch.setattr(pool, "master_failed", promoted_back)
        with pytest.raises(seen):
            client.acquire_many(NAMES, TTL)
        monkeypatch.undo()
        assert eventually(lambda: demotion.held(key_prefix) == 0, 5.0), \
            "locks the first send took were left held"
    finally:
        fronts.close()
