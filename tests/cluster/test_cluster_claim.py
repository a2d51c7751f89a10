"""Claims on Redis Cluster (``acquire_many(..., limit=k)``): exactly k free names taken across the
masters, never one another client holds, every name in exactly one of acquired, not_acquired and
not_tried; processes claiming at once get disjoint shares of k each; claimed locks auto-renewed;
bad arguments refused before anything is sent."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from scenarios._harness import CTX, run_workers
from turbolock import InvalidArgumentError
from turbolock._wire.slots import key_slot
from turbolock.cluster import ClusterLockClient
from turbolock.redis_cluster import RedisCluster

from ._workers import claim_contender

NAMES = [f"shard:{i}" for i in range(1000)]


def test_a_claim_takes_exactly_k_free_names_across_masters(cluster: RedisCluster,
                                                           cluster_client: ClusterLockClient,
                                                           key_prefix: str) -> None:
    blocked = cluster_client.acquire_many(NAMES[::3], 30).acquired
    held_by_others = set(NAMES[::3])
    claims = [cluster_client.acquire_many(NAMES, 30, limit=50) for _ in range(2)]
    for claim in claims:
        got = {str(lease.name) for lease in claim.acquired}
        assert len(got) == 50 and not got & held_by_others
        assert set(claim.not_acquired) <= held_by_others
        held_by_others |= got  # the next claim finds these held
        parts = [got, set(claim.not_acquired), set(claim.not_tried)]
        assert sum(len(part) for part in parts) == len(NAMES) and set().union(*parts) == set(NAMES)
    first, second = ({lease.name for lease in claim.acquired} for claim in claims)
    assert not first & second, "a name was claimed twice"
    rest = cluster_client.acquire_many(NAMES, 30, limit=len(NAMES))  # more than are free: all free ones
    assert len(rest.acquired) == len(NAMES) - len(blocked) - 100 and rest.not_tried == []
    masters = {cluster.master_of(key_slot(key_prefix.encode() + lease.key)).port for lease in rest.acquired}
    assert len(masters) == cluster.masters, "a claim of every free name reaches every master"
    assert all(info.held for info in cluster_client.query_many(NAMES))
    leases = [*blocked, *claims[0].acquired, *claims[1].acquired, *rest.acquired]
    assert cluster_client.release_many(leases) == [True] * len(NAMES)


def test_claimed_locks_are_renewed(cluster_client: ClusterLockClient) -> None:
    claim = cluster_client.acquire_many(NAMES, 0.6, limit=20, auto_renew=True)
    assert len(claim.acquired) == 20 and cluster_client.renewing == 20
    time.sleep(1.5)
    assert all(cluster_client.check(lease) is not None for lease in claim.acquired)
    assert cluster_client.release_many(claim.acquired) == [True] * 20


def test_bad_claims_are_refused_before_sending(cluster_client: ClusterLockClient) -> None:
    cases = (({"limit": 0}, "limit"), ({"limit": 2, "all_or_nothing": True}, "all_or_nothing"),
             ({"limit": 1, "tokens": [b"short"] * 2}, "tokens"))
    for kwargs, argument in cases:
        with pytest.raises(InvalidArgumentError) as info:
            cluster_client.acquire_many(["a", "b"], 10, **kwargs)  # type: ignore[arg-type]
        assert info.value.argument == argument
    with pytest.raises(InvalidArgumentError) as info:
        cluster_client.acquire_many(["a", "a"], 10, limit=1)
    assert info.value.argument == "names"
    assert not any(info.held for info in cluster_client.query_many(["a", "b"]))


def test_processes_claiming_at_once_get_disjoint_shares(cluster: RedisCluster, core_name: str,
                                                        key_prefix: str) -> None:
    workers, k = 4, 100
    start = CTX.Barrier(workers)
    reports = run_workers(claim_contender, [(cluster.url, core_name, key_prefix, NAMES, k, start)] * workers)
    assert {report["implementation"] for report in reports} == {core_name}
    assert [len(report["got"]) for report in reports] == [k] * workers
    grants = Counter(name for report in reports for name in report["got"])
    assert [name for name, count in grants.items() if count > 1] == [], "a shard was claimed twice"
    with ClusterLockClient.from_url(cluster.url, core=core_name, key_prefix=key_prefix) as client:
        assert sum(info.held for info in client.query_many(NAMES)) == workers * k
