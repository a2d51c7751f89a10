"""A threaded Redis Cluster bulk call ends within its budget (README "Deadlines": ``timeout`` per
chunk; a node that stops answering fails it after one ``timeout``), map reads and ASK redirects
included, and however many calls run at once. Each was found in review:

- items answered ASK went to the importing node one at a time, each with the whole call's
  deadline (none: infinity), so a stopped importing node cost one ``timeout`` per item;
- after a slow map read (a stopped first start-up node), each master's share got a whole
  ``timeout`` again, and a claim's chunks too;
- the masters' shares ran on a process-wide pool of 16 threads: with a master stopped and more
  callers than that, shares queued behind each other for two, three ``timeout``s, and an
  auto-renewed lock on a healthy master went unrenewed and was lost.

The importing node down: its ASKING call's connection error ended the whole call, and the locks
the same round took on other items were neither handed back nor released (held by nobody for
their ttl); now the item is sent again within the budget, then reported not sent."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.errors import AcquireOutcomeUnknownError, LockError
from turbolock.redis_cluster import RedisCluster

from ._helpers import names_on, slot_owners, start_slot_move

pytestmark = pytest.mark.timing

T = 1.0
SLACK = 0.5
CALLERS = 40


def _timed(call: Callable[[], object]) -> tuple[float, object]:
    started = time.monotonic()
    try:
        outcome = call()
    except LockError as exc:
        outcome = exc
    return time.monotonic() - started, outcome


def _client(cluster: RedisCluster, core_name: str, key_prefix: str, timeout: float = T,
            **options: object) -> ClusterLockClient:
    return ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=timeout,
                                      connect_timeout=timeout, **options)


def test_items_asked_to_a_stopped_importing_node(quiet_cluster: RedisCluster, core_name: str,
                                                 key_prefix: str) -> None:
    names = [f"{{ask}}:{i}" for i in range(5)]  # one slot, one chunk
    slot = key_slot((key_prefix + names[0]).encode())
    source = quiet_cluster.master_of(slot)
    target = next(node for node in quiet_cluster.nodes if node.port != source.port)
    src = redis.Redis(host=source.host, port=source.port)
    dst = redis.Redis(host=target.host, port=target.port)
    client = _client(quiet_cluster, core_name, key_prefix)
    try:
        assert client.query("warm").held is False  # the map is read while every node answers
        pool = client._cluster.node((target.host, target.port)).pool
        idle = [pool.get(time.monotonic() + 5) for _ in names]  # as after earlier calls to it
        for conn in idle:
            pool.put(conn)
        start_slot_move(src, dst, slot)
        target.pause()
        try:
            took, outcome = _timed(lambda: client.acquire_many(names, 30))
        finally:
            target.resume()
        assert took < T + SLACK, f"acquire_many took {took:.2f}s (budget {T}s for one chunk): {outcome!r}"
        assert isinstance(outcome, AcquireOutcomeUnknownError)  # sent, unanswered: maybe held
    finally:
        for node in (src, dst):
            node.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
        client.close()
        src.close()
        dst.close()


@pytest.mark.parametrize("limit", [None, 2], ids=["acquire_many", "claim"])
def test_a_call_after_a_slow_map_read(quiet_cluster: RedisCluster, core_name: str, key_prefix: str,
                                      limit: int | None) -> None:
    """The first start-up node stopped: the map read spends part of the budget on it, and the
    shares (or the claim's chunks) get what is left, not a new ``timeout``."""
    timeout = 2.0
    stopped, other = quiet_cluster.nodes[0], quiet_cluster.nodes[1]
    names = names_on(quiet_cluster, key_prefix, stopped.port, 2, "s")
    if limit is None:
        names += names_on(quiet_cluster, key_prefix, other.port, 1, "o")
    client = _client(quiet_cluster, core_name, key_prefix, timeout, startup_nodes=[quiet_cluster.urls[1]])
    stopped.pause()
    try:
        took, outcome = _timed(lambda: client.acquire_many(names, 30, limit=limit))
    finally:
        stopped.resume()
        client.close()
    assert took < timeout + SLACK, f"a one-chunk call took {took:.2f}s, budget {timeout}s: {outcome!r}"
    assert isinstance(outcome, LockError)


def test_many_callers_with_a_stopped_master(quiet_cluster: RedisCluster, core_name: str,
                                            key_prefix: str) -> None:
    """More callers than the old pool's 16 threads, each with a share on a stopped master; and
    beside them a client whose auto-renewed locks live on the healthy masters."""
    first, second, stopped = quiet_cluster.nodes[:3]
    ok_names = names_on(quiet_cluster, key_prefix, first.port, 2 * CALLERS, "ok")
    stopped_names = names_on(quiet_cluster, key_prefix, stopped.port, 2 * CALLERS, "stopped")
    renewed_names = (names_on(quiet_cluster, key_prefix, first.port, 1, "r1")
                     + names_on(quiet_cluster, key_prefix, second.port, 1, "r2"))
    busy = _client(quiet_cluster, core_name, key_prefix, max_connections=4 * CALLERS)
    renewer = _client(quiet_cluster, core_name, key_prefix, 2.0)
    took: list[float] = []
    try:
        assert busy.query("warm").held is False  # the slot map is read while every node answers
        renewed = renewer.acquire_many(renewed_names, 1.5, auto_renew=True)
        assert renewed.all_acquired

        def call(i: int) -> None:
            names = ok_names[2 * i:2 * i + 2] + stopped_names[2 * i:2 * i + 2]
            elapsed, _ = _timed(lambda: busy.acquire_many(names, 30))
            took.append(elapsed)

        stopped.pause()
        try:
            threads = [threading.Thread(target=call, args=(i,)) for i in range(CALLERS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        finally:
            stopped.resume()
        assert len(took) == CALLERS
        late = [t for t in took if t > T + SLACK]
        assert not late, f"{len(late)} of {CALLERS} one-chunk calls overran {T}s: {max(late):.2f}s"
        lost = [lease.name for lease in renewed.acquired if lease.is_lost]
        assert not lost, f"auto-renewed locks {lost} on healthy masters were lost"
    finally:
        busy.close()
        renewer.close()


def test_the_importing_node_down_leaves_no_lock_held_by_nobody(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, extra_config=["cluster-require-full-coverage no"])
    owners = slot_owners(cluster)
    source, target = cluster.nodes[1], cluster.nodes[2]  # not the client's start-up node
    moving = next(name for name in (f"{{m{i}}}:a" for i in range(10_000))
                  if owners[key_slot((key_prefix + name).encode())] == source.port)
    slot = key_slot((key_prefix + moving).encode())
    others = [name for name in names_on(cluster, key_prefix, source.port, 8, "o")
              if key_slot((key_prefix + name).encode()) != slot][:3]
    src = redis.Redis(host=source.host, port=source.port)
    dst = redis.Redis(host=target.host, port=target.port)
    client = ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix, timeout=T)
    try:
        assert client.query(others[0]).held is False  # the map is read while every node is up
        start_slot_move(src, dst, slot)
        dst.close()
        target.kill()
        took, outcome = _timed(lambda: client.acquire_many([moving, *others], 60))
        assert took < T + SLACK, f"acquire_many took {took:.2f}s: {outcome!r}"
        # The item that could not be sent is named so; the others' locks are the caller's.
        assert isinstance(outcome, AcquireOutcomeUnknownError), outcome
        assert outcome.not_sent == [moving]
        assert sorted(lease.name for lease in outcome.acquired) == sorted(others)
        assert all(src.get(key_prefix + name) is not None for name in others)
        assert client.release_many(outcome.acquired) == [True] * len(others)
    finally:
        client.close()
        src.close()
