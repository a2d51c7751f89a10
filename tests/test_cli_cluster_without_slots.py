"""``turbolock locks`` on a Redis Cluster node whose cluster does not cover every slot (a node
not yet joined, or a cluster being set up): redis-py's RedisCluster raises
``RedisClusterException``, which is a plain ``Exception``, not a ``RedisError``; the CLI let it
out as a traceback (found in review). The README: every command "ends a failure with one line
on stderr (never a traceback, never a password): ... 1 when the server refused or could not be
reached"."""

from __future__ import annotations

import pytest

from _cli import assert_clean_failure, run_cli
from turbolock.redis_cluster import free_cluster_port
from turbolock.redis_server import RedisServer

PASSWORD = "s3cr3t-cluster-pw"


@pytest.mark.parametrize("action", [["list"], ["inspect", "job"], ["release", "job", "--force", "--yes"]],
                         ids=["list", "inspect", "release"])
def test_locks_on_a_cluster_node_without_slots_fails_in_one_line(action: list[str]) -> None:
    # a cluster node's bus listens on port + 10000: its port comes from the cluster range
    with RedisServer(port=free_cluster_port(),
                     extra_config=["cluster-enabled yes", f"requirepass {PASSWORD}"]) as server:
        url = f"redis://:{PASSWORD}@{server.host}:{server.port}/0"
        done = run_cli("locks", action[0], url, *action[1:], timeout=30)
    assert_clean_failure(done, 1, PASSWORD)
