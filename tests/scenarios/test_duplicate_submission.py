"""Duplicate submission: one form submitted 50 times at once (5 processes x 10 threads)."""

from __future__ import annotations

import uuid

import pytest
import redis

from turbolock.redis_server import RedisServer

from ._harness import CTX, run_workers
from ._workers import data_key, submission_worker

pytestmark = pytest.mark.slow

PROCESSES = 5
THREADS = 10


def test_one_form_is_inserted_once(redis_server: RedisServer, core_name: str, key_prefix: str,
                                   raw: redis.Redis) -> None:
    form_id = f"form-{uuid.uuid4().hex[:8]}"
    barrier = CTX.Barrier(PROCESSES * THREADS)

    reports = run_workers(submission_worker,
                          [(redis_server.url, core_name, key_prefix, form_id, THREADS, barrier)] * PROCESSES)

    outcomes = [outcome for report in reports for outcome in report]
    assert len(outcomes) == PROCESSES * THREADS
    assert outcomes.count("inserted") == 1, f"outcomes: {sorted(outcomes)}"
    assert set(outcomes) <= {"inserted", "locked-out", "already-processed"}
    assert raw.lrange(data_key(key_prefix, "orders"), 0, -1) == [form_id.encode()]
    assert not raw.exists(key_prefix + f"submit:{form_id}")
