"""A holder stopped (SIGSTOP) for 2.5 ttls in the middle of its section, while the others go on.

Stopped before its last check, it finds the lease gone when it resumes and drops its write:
nothing breaks. Stopped after the check, it writes late, after a successor took the lock: no
lock can prevent that, the checker must see it (the negative control), and only a fenced
resource refuses those writes."""

from __future__ import annotations

import pytest

from turbolock.redis_server import RedisServer

from ._checker import LATE_WRITE, LOST_UPDATE, OVERLAP
from ._expect import expect_detected, expect_safe
from ._faults import HolderPause
from ._run import run_fault
from ._topology import Topology
from ._workload import AFTER_CHECK, BEFORE_CHECK

pytestmark = pytest.mark.slow


def test_paused_before_the_check(resource_server: RedisServer) -> None:
    with Topology() as topology:
        outcome = run_fault(HolderPause(BEFORE_CHECK), topology, resource_server)
    assert outcome.history.pauses, "no holder paused"
    expect_safe(outcome)


def test_negative_control_paused_after_the_check_writes_late(resource_server: RedisServer) -> None:
    with Topology() as topology:
        outcome = run_fault(HolderPause(AFTER_CHECK), topology, resource_server)
    expect_detected(outcome, (OVERLAP, LOST_UPDATE, LATE_WRITE))


def test_paused_after_the_check_a_fenced_resource_refuses_late_writes(resource_server: RedisServer) -> None:
    with Topology() as topology:
        outcome = run_fault(HolderPause(AFTER_CHECK, fenced=True), topology, resource_server)
    expect_safe(outcome, refused=True)
