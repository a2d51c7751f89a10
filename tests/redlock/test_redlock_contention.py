"""Several OS processes contend for one Redlock over 3 masters: exactly one holds it at a time,
and the others are told Conflicted."""

from __future__ import annotations

import itertools

import pytest
import redis

from scenarios._harness import CTX, run_workers
from turbolock.redis_server import RedisServer

from ._workers import contender

pytestmark = pytest.mark.slow

WORKERS = 4
ROUNDS = 12


def test_processes_exclude_each_other_and_see_conflicts(three: list[RedisServer], core_name: str,
                                                        key_prefix: str) -> None:
    start = CTX.Barrier(WORKERS)
    urls = [server.url for server in three]
    reports = run_workers(contender, [(urls, core_name, key_prefix, ROUNDS, start)] * WORKERS)

    assert {report["implementation"] for report in reports} == {core_name}
    assert sum(report["crowded"] for report in reports) == 0, "two holders were inside at once"
    data = redis.Redis.from_url(three[0].url)
    try:
        assert int(data.get(key_prefix + "data:counter")) == WORKERS * ROUNDS, "an update was lost"
    finally:
        data.close()
    intervals = sorted(interval for report in reports for interval in report["intervals"])
    overlaps = [(a, b) for a, b in itertools.pairwise(intervals) if b[0] < a[1]]
    assert not overlaps, f"holders overlapped in time: {overlaps[:3]}"
    statuses = [status for report in reports for status in report["statuses"]]
    conflicted = sum(report["statuses"].get("conflicted", 0) for report in reports)
    assert conflicted > 0, f"no contender was ever told Conflicted: {statuses}"
    assert set(statuses) <= {"acquired", "conflicted"}
