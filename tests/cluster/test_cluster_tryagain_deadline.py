"""What a caller gets when a free lock's slot stays open (MIGRATING/IMPORTING, a reshard that
stopped half-way) longer than the call's deadline, for the calls whose scripts declare their own
keys: a TimeoutError saying the cluster kept answering TRYAGAIN, within the deadline, and nothing
held. (It was a plain ResponseError, the class of WRONGTYPE and script errors: found in review.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS
from turbolock._sync.executor import Executor
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.errors import SlotMovingError, TimeoutError
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, other_master, start_slot_move

TIMEOUT = 1.0


@pytest.mark.parametrize("op", ["try_acquire-fenced", "acquire_many-fenced", "fair-try"])
@pytest.mark.parametrize("front", FRONTS)
def test_a_tryagain_that_outlives_the_deadline_is_a_timeout(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str, op: str) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    fronts = cluster_fronts(front, cluster.url, core_name, key_prefix, timeout=TIMEOUT)
    try:
        client = fronts.make()
        name = "{open-slot}:x"
        key = (key_prefix + name).encode()
        slot = key_slot(key)
        lease = client.try_acquire(name, 30, fenced=True)
        assert lease is not None and client.release(lease)
        source = cluster.master_of(slot)
        src, dst = raws(source), raws(other_master(cluster, source))
        start_slot_move(src, dst, slot)  # and left open, as a reshard that stopped half-way does
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="TRYAGAIN"):
            if op == "try_acquire-fenced":
                client.try_acquire(name, 30, fenced=True)
            elif op == "acquire_many-fenced":
                client.acquire_many([name], 30, fenced=True)
            else:
                client.lock(name, 30, fair=True).acquire(blocking=False)
        took = time.monotonic() - started
        assert took < TIMEOUT + 0.5, took
        # Nothing held anywhere: the fence counter alone, on the source.
        assert src.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 1
        assert dst.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    finally:
        fronts.close()


def test_a_resend_the_deadline_cut_before_its_write_leaves_the_refusal(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], monkeypatch: pytest.MonkeyPatch) -> None:
    # A busy host: the resend after a TRYAGAIN pause reaches its write only after the deadline
    # (the executor then refuses to write it: UnsentTimeoutError). The TRYAGAIN stands, as a
    # SlotMovingError a blocking wait goes on through; a bare UnsentTimeoutError ended an endless
    # fair wait mid-reshard (seen in CI).
    cluster = own_cluster(masters=3, replicas=0)
    client = ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=TIMEOUT)
    try:
        name = "{late-resend}:x"
        slot = key_slot((key_prefix + name).encode())
        lease = client.try_acquire(name, 30, fenced=True)
        assert lease is not None and client.release(lease)
        source = cluster.master_of(slot)
        src, dst = raws(source), raws(other_master(cluster, source))
        start_slot_move(src, dst, slot)
        original = Executor.script_one
        calls = []

        def late_after_the_first(self: Executor, script: Any, key: bytes, token: bytes, ttl_ms: int | None,
                                 deadline: float | None = None) -> object:
            calls.append(key)
            if len(calls) > 1 and deadline is not None:
                time.sleep(max(0.0, deadline - time.monotonic()) + 0.01)
            return original(self, script, key, token, ttl_ms, deadline)

        monkeypatch.setattr(Executor, "script_one", late_after_the_first)
        with pytest.raises(SlotMovingError):
            client.try_acquire(name, 30, fenced=True)
        assert len(calls) == 2
        assert src.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 1  # the counter alone
    finally:
        client.close()
