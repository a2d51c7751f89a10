"""Several OS processes, each running an event loop with several tasks on one AsyncRedlockClient,
contend for the same names over 3 masters: exactly one holder of a name at a time (counted in
Redis, and by the holders' time intervals), no update lost, and contenders told Conflicted. The
same workers with no lock are the negative control: the checks do catch two holders at once."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from _async_redlock_workers import contender

from _raw import Raws
from scenarios._harness import CTX, run_workers
from turbolock.redis_server import RedisServer

pytestmark = pytest.mark.slow

WORKERS = 3
TASKS = 4
ROUNDS = 5
NAMES = ["hot:0", "hot:1"]


def _expected_rounds() -> dict[str, int]:
    counts = dict.fromkeys(NAMES, 0)
    for _, task, round_ in itertools.product(range(WORKERS), range(TASKS), range(ROUNDS)):
        counts[NAMES[(task + round_) % len(NAMES)]] += 1
    return counts


def _run(three: list[RedisServer], core_name: str, key_prefix: str, locked: bool) -> list[dict[str, Any]]:
    start = CTX.Barrier(WORKERS)
    urls = [server.url for server in three]
    args = (urls, core_name, key_prefix, NAMES, TASKS, ROUNDS, locked, start)
    return run_workers(contender, [args] * WORKERS)


def _overlaps(reports: list[dict[str, Any]], name: str) -> list[tuple[Any, Any]]:
    intervals = sorted(tuple(interval) for report in reports for interval in report["intervals"][name])
    return [(a, b) for a, b in itertools.pairwise(intervals) if b[0] < a[1]]


def test_processes_with_event_loops_exclude_each_other(three: list[RedisServer], core_name: str,
                                                       key_prefix: str, raws: Raws) -> None:
    reports = _run(three, core_name, key_prefix, locked=True)

    assert {report["implementation"] for report in reports} == {core_name}
    assert sum(report["crowded"] for report in reports) == 0, "two holders were inside at once"
    data = raws(three)[0]
    for name, rounds in _expected_rounds().items():
        assert int(data.get(f"{key_prefix}data:counter:{name}") or 0) == rounds, f"{name}: an update was lost"
        assert sum(len(report["intervals"][name]) for report in reports) == rounds
        overlaps = _overlaps(reports, name)
        assert not overlaps, f"holders of {name} overlapped in time: {overlaps[:3]}"
    statuses = {status for report in reports for status in report["statuses"]}
    conflicted = sum(report["statuses"].get("conflicted", 0) for report in reports)
    assert conflicted > 0, f"no contender was ever told Conflicted: {statuses}"
    assert statuses <= {"acquired", "conflicted"}
    for raw in raws(three):  # every lock was released: nothing but the shared data is left
        assert [key for key in raw.scan_iter(match=key_prefix + "hot:*")] == []


def test_negative_control_without_the_lock_the_checks_catch_overlaps(three: list[RedisServer], core_name: str,
                                                                     key_prefix: str, raws: Raws) -> None:
    reports = _run(three, core_name, key_prefix, locked=False)

    assert sum(report["crowded"] for report in reports) > 0, "the holder count never saw two inside"
    assert any(_overlaps(reports, name) for name in NAMES), "the intervals never overlapped"
    data = raws(three)[0]
    total = sum(int(data.get(f"{key_prefix}data:counter:{name}") or 0) for name in NAMES)
    assert total < WORKERS * TASKS * ROUNDS, "no update was lost with nothing excluding the holders"
