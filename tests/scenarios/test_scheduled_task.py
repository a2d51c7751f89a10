"""Scheduled task: 8 processes race to run the report of each date; exactly one run per date."""

from __future__ import annotations

import pytest
import redis

from turbolock.redis_server import RedisServer

from ._harness import CTX, run_workers
from ._workers import data_key, scheduled_report_worker

pytestmark = pytest.mark.slow

WORKERS = 8
DATES = ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]


def test_each_report_runs_exactly_once(redis_server: RedisServer, core_name: str, key_prefix: str,
                                       raw: redis.Redis) -> None:
    barrier = CTX.Barrier(WORKERS)

    reports = run_workers(scheduled_report_worker,
                          [(redis_server.url, core_name, key_prefix, DATES, barrier)] * WORKERS)

    for date in DATES:
        runners = [i for i, report in enumerate(reports) if date in report["ran"]]
        assert len(runners) == 1, f"report {date} ran in workers {runners}"
        assert any(date in report["acquired"] for report in reports)
        assert int(raw.get(data_key(key_prefix, "runs", date))) == 1
        assert int(raw.get(data_key(key_prefix, "done", date))) == runners[0]
        assert not raw.exists(key_prefix + f"report:{date}"), "the report lock was left behind"
    # Only a lock holder may run it; the runner is always among those that acquired.
    for report in reports:
        assert set(report["ran"]) <= set(report["acquired"])
