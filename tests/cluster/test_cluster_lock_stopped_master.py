"""Lock objects on Redis Cluster with the master of their key SIGSTOPped: a blocking acquire
ends by its timeout; a release ends in time, and is retried in the background when it went out
without a reply, or left to the Lock, which still holds the lock, to make again when it never
went out; a waiter subscribed to the key's release is still woken (or polls) and acquires."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from _blocking_async import FRONTS, Fronts
from _eventually import eventually
from turbolock import ConnectionError, LockError, OutcomeUnknownError
from turbolock.redis_cluster import RedisCluster
from turbolock.redis_server import RedisServer

from ._helpers import cluster_fronts, fail_over, names_on, replica_of

T = 0.3


def _fronts(front: str, cluster: RedisCluster, core_name: str, key_prefix: str) -> Fronts:
    return cluster_fronts(front, cluster.urls[2], core_name, key_prefix, timeout=T, connect_timeout=T)


@pytest.mark.parametrize("front", FRONTS)
def test_lock_under_a_stopped_master(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str,
        raws: Callable[[RedisServer], redis.Redis], front: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    fronts = _fronts(front, cluster, core_name, key_prefix)
    try:
        holder, waiter = fronts.make(), fronts.make()
        stopped = cluster.nodes[0]
        busy, mine = names_on(cluster, key_prefix, stopped.port, 2, "k")
        held = holder.lock(busy, 10)
        assert held.acquire()
        own = waiter.lock(mine, 10)
        assert own.acquire()
        stopped.pause()
        try:
            # a blocking acquire of a held lock: ends by its timeout
            started = time.monotonic()
            try:
                got = waiter.lock(busy, 10, timeout=1.0).acquire()
            except LockError as exc:
                got = exc
            took = time.monotonic() - started
            assert took < 1.0 + 2 * T + 0.3, f"acquire(timeout=1.0) took {took:.2f}s ({got!r})"
            # the exit of a held lock: in time
            started = time.monotonic()
            try:
                own.release()
                out: object = "released"
            except LockError as exc:
                out = exc
            took = time.monotonic() - started
            assert took < 3 * T + 0.3, f"release took {took:.2f}s ({out!r})"
        finally:
            stopped.resume()
        raw = raws(stopped)
        key = key_prefix + mine
        assert isinstance(out, ConnectionError), f"release() on a stopped master: {out!r}"
        if isinstance(out, OutcomeUnknownError):  # it went out: retried in the background
            assert eventually(lambda: raw.exists(key) == 0, 5.0), "the unconfirmed release was not retried"
        else:  # it never went out: the Lock still holds the lock, and releases it now
            assert raw.exists(key) == 1
            own.release()
            assert raw.exists(key) == 0
        held.release()
    finally:
        fronts.close()


def _waiting(waiter: Any, name: str, timeout: float) -> tuple[threading.Thread, dict[str, object]]:
    """A thread blocking in ``waiter.lock(name).acquire(timeout)``; its outcome (``got``: True,
    False or the error) and when it came (``at``) in the dict, once the thread ends."""
    result: dict[str, object] = {}

    def wait() -> None:
        try:
            result["got"] = waiter.lock(name, 20, timeout=timeout).acquire()
        except BaseException as exc:
            result["got"] = exc
        result["at"] = time.monotonic()

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, result


@pytest.mark.parametrize("front", FRONTS)
def test_waiter_acquires_after_a_stop_and_a_release(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, front: str) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    fronts = _fronts(front, cluster, core_name, key_prefix)
    try:
        holder, waiter = fronts.make(), fronts.make()
        stopped = cluster.nodes[0]
        (name,) = names_on(cluster, key_prefix, stopped.port, 1, "w")
        held = holder.lock(name, 20)
        assert held.acquire()
        thread, result = _waiting(waiter, name, 8.0)
        time.sleep(0.8)  # subscribed, waiting
        stopped.pause()
        time.sleep(1.5)
        stopped.resume()
        time.sleep(0.5)
        held.release()
        released_at = time.monotonic()
        thread.join(12)
        assert not thread.is_alive()
        assert result["got"] is True, f"waiter: {result}"
        late = result["at"] - released_at  # type: ignore[operator]
        assert late < 1.0, f"waiter acquired {late:.2f}s after the release"
    finally:
        fronts.close()


@pytest.mark.parametrize("front", FRONTS)
def test_waiter_acquires_after_a_manual_failover_and_a_release(
        own_cluster: Callable[..., RedisCluster], core_name: str, key_prefix: str, front: str) -> None:
    cluster = own_cluster(masters=3, replicas=1, node_timeout=2000)
    fronts = _fronts(front, cluster, core_name, key_prefix)
    try:
        holder, waiter = fronts.make(), fronts.make()
        old = cluster.nodes[0]
        new = replica_of(cluster, old)
        (name,) = names_on(cluster, key_prefix, old.port, 1, "w")
        held = holder.lock(name, 20)
        assert held.acquire()
        thread, result = _waiting(waiter, name, 40.0)
        time.sleep(0.8)
        fail_over(cluster, new)
        time.sleep(1.0)
        for _ in range(20):
            try:
                held.release()
                break
            except LockError:
                time.sleep(0.1)
        released_at = time.monotonic()
        thread.join(15)
        assert not thread.is_alive()
        assert result["got"] is True, f"waiter: {result}"
        late = result["at"] - released_at  # type: ignore[operator]
        assert late < 1.5, f"waiter acquired {late:.2f}s after the release"
    finally:
        fronts.close()
