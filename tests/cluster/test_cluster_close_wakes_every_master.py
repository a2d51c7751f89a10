"""close() ends every blocking acquire at once with ClientClosedError (README, Errors: "a
blocking acquire stops waiting at once"), whatever one master's subscriber is doing. A threaded
ClusterLockClient's close() stopped the masters' subscribers one after another, each waking its
own waiters and then waiting for its thread: with one master stopped just as its subscriber
connection was lost, that thread sat in a connect (up to ``connect_timeout``), and the waiters
of the healthy masters after it were told only when that ended (found in review)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from _eventually import eventually
from turbolock.cluster import ClusterLockClient
from turbolock.errors import ClientClosedError
from turbolock.redis_cluster import RedisCluster

from ._helpers import names_on, other_master

pytestmark = pytest.mark.parametrize("core_name", ["c"], indirect=True)  # the waker's rule: no core's own


def _numsub(port: int, channel: str) -> int:
    with redis.Redis(port=port) as raw:
        return int(raw.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1])


def test_close_ends_the_waiters_of_every_master_while_one_subscriber_is_stuck_connecting(
        quiet_cluster: RedisCluster, core_name: str, key_prefix: str) -> None:
    cluster = quiet_cluster
    stopped = cluster.nodes[0]
    healthy = other_master(cluster, stopped)
    x_name = names_on(cluster, key_prefix, stopped.port, 1, "stuckx")[0]
    y_name = names_on(cluster, key_prefix, healthy.port, 1, "stucky")[0]
    options: dict[str, Any] = {"core": core_name, "key_prefix": key_prefix, "timeout": 5.0,
                               "connect_timeout": 2.5}
    holder = ClusterLockClient.from_url(cluster.url, **options)
    client = ClusterLockClient.from_url(cluster.url, **options)
    results: dict[str, Any] = {}
    ends: dict[str, float] = {}

    def wait(name: str) -> None:
        try:
            results[name] = client.lock(name, 30).acquire(timeout=15)
        except BaseException as exc:
            results[name] = exc
        ends[name] = time.monotonic()

    raw = redis.Redis(port=stopped.port)
    try:
        held_x = holder.try_acquire(x_name, 60)
        held_y = holder.try_acquire(y_name, 60)
        assert held_x is not None and held_y is not None
        x = threading.Thread(target=wait, args=(x_name,), daemon=True)
        x.start()
        assert eventually(lambda: _numsub(stopped.port, key_prefix + x_name) == 1, 5)
        y = threading.Thread(target=wait, args=(y_name,), daemon=True)
        y.start()
        assert eventually(lambda: _numsub(healthy.port, key_prefix + y_name) == 1, 5)
        # The stopped master's subscriber connection is lost, and the master stops: the
        # subscriber's thread connects again, and waits for the handshake's answer.
        raw.client_kill_filter(_type="pubsub")
        stopped.pause()
        time.sleep(0.3)
        assert not ends
        closing = time.monotonic()
        client.close()
        y.join(10)
        assert isinstance(results.get(y_name), ClientClosedError), results
        late = ends[y_name] - closing
        assert late < 0.5, f"the waiter on a healthy master ended {late:.2f}s after close() began"
    finally:
        stopped.resume()
        raw.close()
        time.sleep(0.2)
        client.close()
        holder.close()
