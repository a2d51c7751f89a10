"""``redis-cli --cluster reshard`` of 1000 slots while one client holds 3,000 auto-renewed locks
and other processes churn bulk acquires and try to take those locks: no lock is lost, none is
granted twice, and every bulk call completes. The control holds the same locks without renewal:
they expire during the run and the contenders do take them, so the check can catch a grant."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from _lost_locks import LostLocks
from _raw import NodeRaws
from scenarios._harness import CTX, Workers
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster
from turbolock.server_binaries import binaries

from ._helpers import node_id
from ._workers import reshard_contender

WORKERS = 2
NAMES = [f"shard:{i}" for i in range(3000)]
TTL = 3.0


def _reshard_under_load(cluster: RedisCluster, client: ClusterLockClient, core_name: str, key_prefix: str,
                        raws: NodeRaws, renew: bool) -> dict[str, Any]:
    lost = LostLocks()
    leases = client.acquire_many(NAMES, TTL, auto_renew=renew, on_lost=lost if renew else None).acquired
    assert len(leases) == len(NAMES)
    source, target = cluster.nodes[0], cluster.nodes[1]

    def slots_of_target() -> int:
        ranges = raws(target).execute_command("CLUSTER", "SLOTS")
        return sum(int(end) - int(start) + 1 for start, end, master, *_ in ranges
                   if int(master[1]) == target.port)

    before = slots_of_target()
    start, done = CTX.Barrier(WORKERS + 1), CTX.Event()
    args = (cluster.url, core_name, key_prefix, NAMES, start, done)
    with Workers(reshard_contender, [args] * WORKERS) as workers:
        start.wait(30)
        time.sleep(0.5)
        resharded = subprocess.run(
            [binaries().cli, "--cluster", "reshard", f"{source.host}:{source.port}",
             "--cluster-from", node_id(raws(source)), "--cluster-to", node_id(raws(target)),
             "--cluster-slots", "1000", "--cluster-yes"], capture_output=True, text=True, timeout=120)
        time.sleep(2 * TTL)  # renewals on the new owners of the moved slots
        done.set()
        reports = workers.results()
    assert resharded.returncode == 0, resharded.stdout[-1000:] + resharded.stderr[-500:]
    return {"leases": leases, "lost": lost.names, "reports": reports, "moved": slots_of_target() - before}


def test_a_reshard_under_load_loses_no_lock_and_grants_none_twice(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        core_name: str, key_prefix: str, raws: NodeRaws, caplog: pytest.LogCaptureFixture) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster)
    with caplog.at_level(logging.INFO, logger="turbolock"):
        run = _reshard_under_load(cluster, client, core_name, key_prefix, raws, renew=True)
    assert run["moved"] == 1000
    assert run["lost"] == [], "\n".join(f"{r.relativeCreated:.0f}ms {r.name}: {r.getMessage()}"
                                         for r in caplog.records[:40])
    infos = client.query_many(NAMES)
    gone = [lease for lease, info in zip(run["leases"], infos, strict=True) if not info.held]
    # What the next failure needs (it failed once under a loaded host, 2026-11-28, py core, with no
    # loss reported when run["lost"] was read): did the client know, and what did it believe?
    beliefs = [f"{lease.name} (lost={lease.is_lost}, valid_for={lease.valid_for():.3f}, "
               f"reported={lease.name in run['lost']})" for lease in gone[:10]]
    log = [f"{r.relativeCreated:.0f}ms {r.name}: {r.getMessage()}" for r in caplog.records[-20:]]
    assert not gone, f"{len(gone)} renewed locks expired: " + ", ".join(beliefs) + "\n" + "\n".join(log)
    assert all(client.check(lease) is not None for lease in run["leases"]), "a lock is no longer ours"
    for report in run["reports"]:
        assert report["rounds"] > 0 and report["errors"] == [], report["errors"][:3]
        assert report["got_held"] == [], f"granted twice: {report['got_held'][:5]}"
        assert report["short_rounds"] == 0, "a bulk acquire of free names did not get them all"
    assert client.release_many(run["leases"]) == [True] * len(NAMES)


@pytest.mark.parametrize("core_name", ["py"], indirect=True)
def test_negative_control_unrenewed_locks_are_taken_by_the_contenders(
        own_cluster: Callable[..., RedisCluster], make_cluster_client: Callable[..., ClusterLockClient],
        core_name: str, key_prefix: str, raws: NodeRaws) -> None:
    cluster = own_cluster(masters=3, replicas=0)
    client = make_cluster_client(cluster)
    run = _reshard_under_load(cluster, client, core_name, key_prefix, raws, renew=False)
    assert sum(len(report["got_held"]) for report in run["reports"]) > 0
