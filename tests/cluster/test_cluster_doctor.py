"""``turbolock doctor`` on a Redis Cluster node: named as one, and a lock taken and released
through ClusterLockClient on the master of its slot."""

from __future__ import annotations

import pytest

from turbolock.cli import main
from turbolock.redis_cluster import RedisCluster


def test_a_cluster_node_is_recognised_and_its_locks_work(cluster: RedisCluster,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", cluster.nodes[1].url])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert "cluster, master" in lines[0]
    assert any(line.startswith("note") and "ClusterLockClient" in line for line in lines)
    assert any(line.startswith("ok") and "locks:" in line for line in lines)
