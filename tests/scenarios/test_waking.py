"""Waking across processes: a thousand waiters on one name, and hand-overs between processes
that take turns instead of the last holder taking the lock again (with its negative control)."""

from __future__ import annotations

import itertools

import pytest
import redis

from turbolock.redis_server import RedisServer

from ._harness import CTX, run_workers
from ._waking_workers import handoff_loop, many_waiters
from ._workers import data_key

pytestmark = pytest.mark.slow

PROCESSES = 4


def test_a_thousand_waiters_on_one_name_each_get_it_once(redis_server: RedisServer, core_name: str,
                                                          key_prefix: str, raw: redis.Redis) -> None:
    counter = data_key(key_prefix, "crowd")
    start = CTX.Barrier(PROCESSES)
    reports = run_workers(many_waiters, [(redis_server.url, core_name, key_prefix, 250, counter, start)]
                          * PROCESSES, timeout=120)
    assert int(raw.get(counter)) == 1000  # no two of them inside at once, none left out
    assert [report["connects"] for report in reports] == [1] * PROCESSES  # one subscriber each
    assert [report["tickets_left"] for report in reports] == [0] * PROCESSES
    assert not raw.exists(key_prefix + "crowd")


def _owner_changes(redis_server: RedisServer, core_name: str, key_prefix: str, wake: bool) -> float:
    start = CTX.Barrier(PROCESSES)
    args = (redis_server.url, core_name, key_prefix, 1.5, wake, start)
    runs = run_workers(handoff_loop, [args] * PROCESSES)
    taken = sorted(itertools.chain.from_iterable(runs), key=lambda entry: entry[1])
    assert len(taken) > 100
    changes = sum(1 for before, after in itertools.pairwise(taken) if before[0] != after[0])
    return 100.0 * changes / (len(taken) - 1)


def test_processes_take_turns_when_woken(redis_server: RedisServer, core_name: str, key_prefix: str) -> None:
    # A worker that releases a lock others wait for lets one of them take it before it tries
    # again; polling waiters would see it free only by luck.
    assert _owner_changes(redis_server, core_name, key_prefix, True) > 80


def test_control_polling_processes_let_the_holder_take_it_again(redis_server: RedisServer, core_name: str,
                                                                key_prefix: str) -> None:
    assert _owner_changes(redis_server, core_name, key_prefix, False) < 20
