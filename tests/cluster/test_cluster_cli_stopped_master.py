"""``turbolock locks`` on a Redis Cluster with one master stopped (SIGSTOP, no replica to take
over) ends within its 5 s socket timeout plus start-up, as on a stopped single server
(``tests/test_cli_stopped_server.py``): redis-py's cluster client retried the stopped master's
timeouts, reading the slot map again between them, for 56 s (found in review)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from _cli import run_cli
from turbolock._wire.slots import key_slot
from turbolock.redis_cluster import RedisCluster

pytestmark = pytest.mark.timing  # a time budget: run on their own

BUDGET = 5.0 + 4.0  # admin.connect's socket timeout, the interpreter's start-up and the map read


@pytest.fixture(scope="module")
def no_failover_cluster() -> Iterator[RedisCluster]:
    with RedisCluster(masters=3, replicas=0, node_timeout=60000) as made:
        yield made


def _name_on(cluster: RedisCluster, port: int) -> str:
    return next(f"job{i}" for i in range(100_000)
                if cluster.master_of(key_slot(f"turbolock:job{i}".encode())).port == port)


@pytest.mark.parametrize("action", ["list", "inspect", "release"])
def test_locks_ends_in_time_with_a_master_stopped(no_failover_cluster: RedisCluster, action: str) -> None:
    entry, stopped = no_failover_cluster.nodes[0], no_failover_cluster.nodes[1]
    name = _name_on(no_failover_cluster, stopped.port)
    extra = {"list": [], "inspect": [name], "release": [name, "--force", "--yes"]}[action]
    stopped.pause()
    try:
        started = time.monotonic()
        done = run_cli("locks", action, entry.url, *extra, timeout=120)
        took = time.monotonic() - started
    finally:
        stopped.resume()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-600:]
    assert took < BUDGET, f"locks {action} took {took:.1f} s with one master stopped"
