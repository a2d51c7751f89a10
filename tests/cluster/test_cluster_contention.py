"""Several OS processes take the same names on one cluster at once: every name is granted to
exactly one of them. The negative control (plain SET, no NX) shows the check catches double grants."""

from __future__ import annotations

from collections import Counter

import pytest

from scenarios._harness import CTX, run_workers
from turbolock.redis_cluster import RedisCluster

from ._workers import bulk_contender

WORKERS = 4
NAMES = [f"stock:{i}" for i in range(1500)]


def _grants(cluster: RedisCluster, core_name: str, key_prefix: str, unsafe: bool) -> Counter[str]:
    start = CTX.Barrier(WORKERS)
    args = (cluster.url, core_name, key_prefix, NAMES, start, unsafe)
    reports = run_workers(bulk_contender, [args] * WORKERS)
    assert {report["implementation"] for report in reports} == {core_name}
    return Counter(name for report in reports for name in report["got"])


def test_every_name_is_granted_to_exactly_one_process(cluster: RedisCluster, core_name: str,
                                                      key_prefix: str) -> None:
    grants = _grants(cluster, core_name, key_prefix, unsafe=False)
    assert set(grants) == set(NAMES), "some names were granted to nobody"
    doubles = [name for name, count in grants.items() if count > 1]
    assert not doubles, f"granted twice: {doubles[:5]}"


@pytest.mark.parametrize("core_name", ["py"], indirect=True)
def test_negative_control_without_nx_the_check_finds_double_grants(cluster: RedisCluster, core_name: str,
                                                                  key_prefix: str) -> None:
    grants = _grants(cluster, core_name, key_prefix, unsafe=True)
    assert sum(count > 1 for count in grants.values()) == len(NAMES)
