"""More interrupted threaded bulk acquires on Redis Cluster: during WAIT (``replicas_ack``), in a
NOSCRIPT retry, with ``replicas_ack`` mid-batch, and followed by ``close()`` as a ``with`` block
does while the other masters' shares still run. Each leaves nothing held."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _eventually import eventually
from _interrupts import acquire_interrupted_in_wait
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer


def test_a_share_interrupted_in_wait_is_released(
        cluster: RedisCluster, make_cluster_client: Callable[..., Any],
        raws: Callable[[RedisServer], redis.Redis], monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_cluster_client(cluster, replicas_ack=1, replicas_timeout=0.5, timeout=2.0)
    assert client.query("{t}warm-up").held is False
    names = [f"{{t}}:{i}" for i in range(500)]  # one slot: one master's share, on the caller's thread
    acquire_interrupted_in_wait(client, names, monkeypatch)
    prefix = client.key_prefix
    left = sum(len(list(raws(node).scan_iter(match=prefix + b"*", count=1000)))
               for node in cluster.nodes[:cluster.masters])
    assert left == 0, f"{left} locks left held after the interrupt"


def test_a_noscript_retry_interrupted_releases_the_first_pass(
        cluster: RedisCluster, make_cluster_client: Callable[..., Any],
        raws: Callable[[RedisServer], redis.Redis], monkeypatch: pytest.MonkeyPatch) -> None:
    from turbolock._flows.bulk_plan import AcquirePlan
    from turbolock._wire.slots import key_slot

    client = make_cluster_client(cluster, chunk_size=100)
    prefix = client.key_prefix
    names = [f"{{n}}:{i}" for i in range(300)]
    owner = raws(cluster.master_of(key_slot(prefix + b"{n}:0")))
    warm = client.acquire_many(["{n}warm-up"], 30, fenced=True).acquired  # the script is loaded there
    assert client.release_many(warm) == [True]
    real = AcquirePlan.encode_indices
    calls = [0]

    def encode_indices(plan: AcquirePlan, buf: Any, indices: Any) -> None:
        calls[0] += 1
        if calls[0] == 2:  # chunk 1 went out: the scripts vanish before chunk 2 (a restart, a flush)
            time.sleep(0.05)
            owner.script_flush()
        if calls[0] == 4:  # the NOSCRIPT retry's first chunk
            time.sleep(0.05)
            raise KeyboardInterrupt
        real(plan, buf, indices)

    monkeypatch.setattr(AcquirePlan, "encode_indices", encode_indices)
    with pytest.raises(KeyboardInterrupt):
        client.acquire_many(names, 30, fenced=True)
    monkeypatch.undo()
    assert calls[0] == 4
    time.sleep(0.3)
    assert eventually(lambda: client.pending_cleanup == 0, 5.0)
    left = sum(1 for key in owner.scan_iter(match=prefix + b"*", count=1000) if not key.endswith(b":fence"))
    assert left == 0, f"{left} locks left held after the interrupt"


def test_close_right_after_the_interrupt_waits_for_the_other_shares(
        cluster: RedisCluster, make_cluster_client: Callable[..., Any],
        raws: Callable[[RedisServer], redis.Redis], monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from turbolock._flows.bulk_plan import AcquirePlan

    encode = AcquirePlan.encode_indices

    def slow_shares(plan: AcquirePlan, buf: Any, indices: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            time.sleep(0.05)
            raise KeyboardInterrupt
        time.sleep(0.3)  # the other masters' shares are still going when the caller is interrupted
        encode(plan, buf, indices)

    client = make_cluster_client(cluster)
    assert client.query("warm-up").held is False
    monkeypatch.setattr(AcquirePlan, "encode_indices", slow_shares)
    with pytest.raises(KeyboardInterrupt):
        try:
            client.acquire_many([f"sharded:{i}" for i in range(3000)], 30)
        finally:
            client.close()  # what ``with ClusterLockClient(...)`` does on the way out
    time.sleep(1.0)
    monkeypatch.undo()
    prefix = client.key_prefix
    left = sum(len(list(raws(node).scan_iter(match=prefix + b"*", count=1000)))
               for node in cluster.nodes[:cluster.masters])
    assert left == 0, f"{left} locks left held after interrupt + close"


@pytest.mark.parametrize("durable", [True, False], ids=["replicas_ack", "plain"])
def test_a_durable_share_interrupted_mid_batch_is_released(
        cluster: RedisCluster, make_cluster_client: Callable[..., Any],
        raws: Callable[[RedisServer], redis.Redis], monkeypatch: pytest.MonkeyPatch, durable: bool) -> None:
    from turbolock._flows.bulk_plan import AcquirePlan
    from turbolock._wire.slots import key_slot

    extra = {"replicas_ack": 1, "replicas_timeout": 0.5} if durable else {}
    client = make_cluster_client(cluster, timeout=2.0, chunk_size=100, **extra)
    prefix = client.key_prefix
    owner = raws(cluster.master_of(key_slot(prefix + b"{d}:0")))
    assert client.query("{d}warm-up").held is False
    real = AcquirePlan.encode_indices
    calls = [0]

    def encode_indices(plan: AcquirePlan, buf: Any, indices: Any) -> None:
        calls[0] += 1
        if calls[0] == 3:  # chunk 1 answered, chunk 2 in flight
            time.sleep(0.1)
            raise KeyboardInterrupt
        real(plan, buf, indices)

    monkeypatch.setattr(AcquirePlan, "encode_indices", encode_indices)
    with pytest.raises(KeyboardInterrupt):
        client.acquire_many([f"{{d}}:{i}" for i in range(500)], 30)
    monkeypatch.undo()
    time.sleep(0.3)
    assert eventually(lambda: client.pending_cleanup == 0, 5.0)
    left = sum(1 for _ in owner.scan_iter(match=prefix + b"*", count=1000))
    assert left == 0, f"{left} locks left held after the interrupt"
