"""The Lock object across processes: mutual exclusion with blocking acquire, and waiting with timeouts."""

from __future__ import annotations

import time

import pytest
import redis

from turbolock import LockClient
from turbolock.redis_server import RedisServer

from ._harness import CTX, Workers, run_workers
from ._workers import counter_worker, data_key, lock_waiter

pytestmark = pytest.mark.slow

PROCESSES = 4
ITERATIONS = 25


def test_with_lock_excludes_across_processes(redis_server: RedisServer, core_name: str, key_prefix: str,
                                             raw: redis.Redis) -> None:
    start = CTX.Barrier(PROCESSES)

    reports = run_workers(counter_worker, [
        (redis_server.url, core_name, key_prefix, ITERATIONS, i % 2 == 1, start) for i in range(PROCESSES)
    ])

    assert {report["implementation"] for report in reports} == {core_name}
    assert sum(report["overlaps"] for report in reports) == 0, "two holders were inside at once"
    assert int(raw.get(data_key(key_prefix, "counter"))) == PROCESSES * ITERATIONS
    assert int(raw.get(data_key(key_prefix, "inside"))) == 0
    assert not raw.exists(key_prefix + "counter")


def test_waiting_gives_up_on_timeout_and_gets_the_lock_once_released(
        redis_server: RedisServer, core_name: str, key_prefix: str, raw: redis.Redis) -> None:
    waiting = CTX.Event()
    with LockClient.from_url(redis_server.url, core=core_name, key_prefix=key_prefix) as client:
        holder = client.lock("busy", 30)
        holder.acquire()
        with Workers(lock_waiter, [(redis_server.url, core_name, key_prefix, "busy", waiting)]) as workers:
            assert waiting.wait(timeout=30), "the waiter never started its long wait"
            time.sleep(0.2)
            assert holder.owned(), "the waiter must not have taken the lock from the holder"
            raw.set(data_key(key_prefix, "released"), 1)
            holder.release()
            (report,) = workers.results()

    assert report["short_timeout"] == "not-acquired"
    assert "busy" in report["short_timeout_message"]
    assert report["non_blocking"] is False
    assert report["owned_after_failed_try"] is False
    assert report["long_wait"] is True
    assert report["released_flag_seen"] is True, "the waiter got the lock before the holder released it"
    assert report["owned"] is True
    assert report["owned_after_release"] is False
    assert not raw.exists(key_prefix + "busy")
