"""A claim across masters whose reply is lost on a later master: everything the call may hold is
given back, and the error says so, like a claim's on one server. It names the locks the masters
before took (released in the background too) beside the ones the silent master may have taken,
and ``not_sent`` lists every name no master was asked for, the masters after it included.
(Found in review: the error named the silent master's locks alone.)"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

import pytest

from turbolock import AcquireOutcomeUnknownError
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._helpers import names_on

T = 0.5


def test_a_lost_claim_reply_on_a_later_master_names_every_lock_it_may_hold(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = own_cluster(masters=3, replicas=0, node_timeout=60000)
    first, silent, last = cluster.nodes[:3]
    taken = names_on(cluster, key_prefix, first.port, 5, "a")
    lost = names_on(cluster, key_prefix, silent.port, 5, "b")
    never = names_on(cluster, key_prefix, last.port, 5, "c")
    client = make_cluster_client(cluster, timeout=T, connect_timeout=T)
    assert client.query_many(taken + lost + never)  # connections made, the map read
    monkeypatch.setattr(secrets, "randbelow", lambda n: 0)  # the masters in the order of the names
    silent.pause()
    try:
        with pytest.raises(AcquireOutcomeUnknownError) as raised:
            client.acquire_many(taken + lost + never, 30, limit=15)
    finally:
        silent.resume()
    error = raised.value
    assert set(error.names) == set(taken + lost)
    assert error.acquired == []
    assert set(error.not_sent) == set(never)
    deadline = time.monotonic() + 10
    while client.pending_cleanup and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(info.held for info in client.query_many(taken + lost + never)), "a lock was left held"
