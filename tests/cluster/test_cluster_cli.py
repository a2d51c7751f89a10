"""The ``turbolock`` command on a Redis Cluster: ``doctor`` names a node as one and takes and
releases a lock through ClusterLockClient; ``locks list`` scans every master, ``locks release``
frees a lock wherever its slot lives."""

from __future__ import annotations

import pytest

from turbolock.cli import main
from turbolock.cluster import ClusterLockClient
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


def test_locks_are_listed_from_every_master_and_released_where_they_live(
        cluster: RedisCluster, cluster_client: ClusterLockClient, key_prefix: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    names = [f"job:{i}" for i in range(300)]
    leases = cluster_client.acquire_many(names, 30).acquired
    assert len(leases) == 300
    assert main(["locks", "list", cluster.nodes[2].url, "--prefix", key_prefix]) == 0
    listed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert sorted(listed) == sorted(names)
    assert main(["locks", "release", cluster.url, "job:7", "--force", "--yes", "--prefix", key_prefix]) == 0
    assert capsys.readouterr().out.strip() == "job:7: released"
    assert cluster_client.check(leases[7]) is None and cluster_client.check(leases[8]) is not None
